"""Small character tables at CPU inference (``CharBiLSTMEmbedder._small_table_states``): the
general route's vectors bit for bit, and the general route wherever the shortcut does not hold."""

from __future__ import annotations

import pytest
import torch

from textorch.models import padded_rnn
from textorch.models.embedders import CharBiLSTMEmbedder
from textorch.models.onednn_lstm import laid_out_lstm_available

pytestmark = pytest.mark.skipif(not laid_out_lstm_available(), reason="this torch build cannot lay out LSTM weights")


def _encoder() -> CharBiLSTMEmbedder:
    torch.manual_seed(5)
    return CharBiLSTMEmbedder(n_chars=40).eval()  # DeLFT's sizes: 25 -> 2 x 25


def _table(lengths: list[int], seed: int = 0) -> torch.Tensor:
    """Character ids, each row zero-padded after its length, two columns wider than the longest."""
    generator = torch.Generator().manual_seed(seed)
    table = torch.zeros(len(lengths), max(lengths) + 2, dtype=torch.long)
    for row, n in enumerate(lengths):
        table[row, :n] = torch.randint(1, 40, (n,), generator=generator)
    return table


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each call of the shortcut answered (True) or left it to the general route."""
    answered: list[bool] = []
    real = CharBiLSTMEmbedder._small_table_states

    def spy(self, rows):
        result = real(self, rows)
        answered.append(result is not None)
        return result

    monkeypatch.setattr(CharBiLSTMEmbedder, "_small_table_states", spy)
    return answered


def _general(encoder: CharBiLSTMEmbedder, table: torch.Tensor, monkeypatch: pytest.MonkeyPatch) -> torch.Tensor:
    with monkeypatch.context() as patch:
        patch.setattr(CharBiLSTMEmbedder, "_small_table_states", lambda self, rows: None)
        return encoder.encode_rows(table)


@pytest.mark.parametrize("lengths", [[7, 4, 2], [5], [3, 3, 3], [1, 9, 2, 6, 6, 1, 4, 8, 2, 3, 5, 7, 1, 2, 9, 4, 3, 6, 2]])
def test_small_tables_give_the_general_routes_vectors_bit_for_bit(
    lengths: list[int], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Padded rows read backwards within their lengths, unpadded ones, one row, and 19 rows (run
    as a bucket of 20): the same vectors, and each row's both directions' final states."""
    encoder = _encoder()
    table = _table(lengths, seed=len(lengths))
    answered = _spy(monkeypatch)
    with torch.inference_mode():
        got = encoder.encode_rows(table)
        expected = _general(encoder, table, monkeypatch)
        x = encoder.embedding(table)
        _, (h_n, _) = encoder.lstm(torch.nn.utils.rnn.pack_padded_sequence(
            x, torch.tensor(lengths), batch_first=True, enforce_sorted=False))
    assert answered == [True]
    assert got.shape == (len(lengths), 50)
    assert torch.equal(got, expected)
    assert torch.allclose(got, torch.cat(list(h_n), dim=-1), atol=1e-6, rtol=0)


def test_the_general_route_serves_everything_else(monkeypatch: pytest.MonkeyPatch) -> None:
    encoder = _encoder()
    answered = _spy(monkeypatch)
    small, with_empty_row, large = _table([6, 2, 4]), _table([6, 2, 4]), _table([12] * 40)
    with_empty_row[1] = 0
    with torch.inference_mode():
        assert torch.equal(encoder.encode_rows(with_empty_row)[1], torch.zeros(50))  # an empty row: zeros
        encoder.encode_rows(large)  # past a length group's cost and the one-call bound
        with torch.autocast("cpu", dtype=torch.bfloat16):
            encoder.encode_rows(small)  # the LSTM would not run in float32
    assert answered == [False, False, False]
    answered.clear()
    encoder.train()
    encoder.encode_rows(small).sum().backward()  # training: never asked
    encoder.eval()
    with torch.no_grad():  # a validation pass mid-training: asked, and it answers
        encoder.encode_rows(small)
    assert answered == [True]
    assert padded_rnn.both_directions_pay(encoder.lstm, 3, 6, 25)
    assert not padded_rnn.both_directions_pay(encoder.lstm, 40, 12, 25)
