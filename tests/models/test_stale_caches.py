"""Kept values (character vectors of tokens, LSTM weights in oneDNN's layout) never outlive the
weights they were computed from, whichever way the weights are written.

Each write below is one a user or a trainer can make: through ``.data`` (which moves no version
counter), ``load_state_dict``, an in-place copy under ``no_grad``, and a fused optimizer step
(which moves none either). After it, tagging must answer exactly as a network built afresh with
those weights does.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from conftest import trained_once
from textorch.data.corpus import TokenSequence
from textorch.models import padded_rnn
from textorch.models.embedders import CharBiLSTMEmbedder, encode_token_types
from textorch.models.token_vector_cache import TokenVectorCache
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training import train_sequence_labeler

_TRAINED: dict = {}


def _new_values(params: list[nn.Parameter], seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [p.detach() + 0.3 * torch.randn(p.shape, generator=generator) for p in params]


def _through_data(model: nn.Module, seed: int) -> None:
    params = list(model.parameters())
    for p, new in zip(params, _new_values(params, seed)):
        p.data.copy_(new)


def _through_load_state_dict(model: nn.Module, seed: int) -> None:
    names, params = zip(*model.named_parameters())
    model.load_state_dict({**model.state_dict(), **dict(zip(names, _new_values(list(params), seed)))})


def _through_no_grad_copy(model: nn.Module, seed: int) -> None:
    params = list(model.parameters())
    with torch.no_grad():
        for p, new in zip(params, _new_values(params, seed)):
            p.copy_(new)


def _through_fused_optimizer_step(model: nn.Module, seed: int) -> None:
    """A step of an optimizer textorch did not make (fused Adam: no version counter moves)."""
    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=0.3, fused=True)
    generator = torch.Generator().manual_seed(seed)
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


WRITES: dict[str, Callable[[nn.Module, int], None]] = {
    "data_copy": _through_data,
    "load_state_dict": _through_load_state_dict,
    "no_grad_copy": _through_no_grad_copy,
    "optimizer_step": _through_fused_optimizer_step,
}


def _labeler(tiny_conll: Path) -> SequenceLabeler:
    return trained_once(_TRAINED, "conll", lambda: train_sequence_labeler(tiny_conll, max_epoch=2, seed=5,
                                                                          word_hidden=8, char_hidden=4))


def _with_model(labeler: SequenceLabeler, model: nn.Module) -> SequenceLabeler:
    """A labeler of the same vocabularies around ``model``, with nothing kept yet."""
    return SequenceLabeler(labeler.encoder, model, labeler.model_config, labeler.data_config, labeler.embeddings,
                           labeler.input_format, labeler.n_features, labeler.device, labeler.transformer)


def _texts() -> list[TokenSequence]:
    texts = ["John lives in Paris .", "Mary met Peter in Rome", "Paris", "Anna ☃ Berlin", "John met Mary in Paris ."]
    return [TokenSequence(text.split()) for text in texts]


def _tag(labeler: SequenceLabeler) -> list[tuple[list[str], list[float]]]:
    """One-sequence calls (their own route) and a batched call with padded batches."""
    texts = _texts()
    predictions = [labeler.predict([text], batch_size=1)[0] for text in texts] + labeler.predict(texts, batch_size=2)
    return [(p.labels, p.scores) for p in predictions]


@pytest.mark.parametrize("write", list(WRITES))
def test_tagging_after_a_weight_write_answers_as_a_network_built_with_the_new_weights(
    tiny_conll: Path, write: str
) -> None:
    labeler = _with_model(_labeler(tiny_conll), copy.deepcopy(_labeler(tiny_conll).model))
    before = _tag(labeler)
    assert _tag(labeler) == before  # the kept values are in use now
    WRITES[write](labeler.model, seed=7)
    expected = _tag(_with_model(labeler, copy.deepcopy(labeler.model)))
    assert expected != before  # the write changed the answers
    assert _tag(labeler) == expected


@pytest.mark.parametrize("write", list(WRITES))
def test_lstm_outputs_after_a_weight_write_equal_a_fresh_lstms(write: str) -> None:
    """The word BiLSTM at tagging: one unpadded row and a padded batch (direction by direction),
    and the final states a character encoder reads, weights laid out before the write."""
    torch.manual_seed(0)
    rnn = nn.LSTM(6, 5, batch_first=True, bidirectional=True).eval()
    x = torch.randn(3, 7, 6, generator=torch.Generator().manual_seed(1))
    lengths = torch.tensor([7, 5, 2])

    def outputs(module: nn.LSTM) -> list[torch.Tensor]:
        with torch.inference_mode():
            return [padded_rnn.rnn_outputs(module, x[:1], lengths[:1]),
                    padded_rnn.rnn_final_states(module, x, lengths), padded_rnn.rnn_outputs(module, x, lengths)]

    before = outputs(rnn)
    WRITES[write](rnn, seed=3)
    rnn.eval()
    got, expected = outputs(rnn), outputs(copy.deepcopy(rnn))
    for kept, new, fresh in zip(before, got, expected):
        if fresh is None:  # this torch cannot lay out LSTM weights: nothing was kept
            continue
        assert not torch.equal(kept, fresh)
        assert torch.equal(new, fresh)
    with torch.inference_mode():
        plain = rnn(x[:1])[0]
    assert torch.allclose(got[0], plain, atol=1e-6, rtol=0)


@pytest.mark.parametrize("write", list(WRITES))
def test_kept_token_vectors_after_a_weight_write_equal_fresh_ones(write: str) -> None:
    torch.manual_seed(2)
    encoder = CharBiLSTMEmbedder(12, char_dim=5, hidden=3).eval()
    table = np.array([[3, 4, 0], [1, 1, 2], [5, 0, 0]])
    cache = TokenVectorCache()
    before = cache.vectors(encoder, table, "cpu")
    WRITES[write](encoder, seed=4)
    encoder.eval()
    got = cache.vectors(encoder, table, "cpu")
    with torch.inference_mode():
        expected = encode_token_types(copy.deepcopy(encoder), torch.from_numpy(table))
    assert not torch.equal(before, expected)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("size", [3, 5000])  # compared as bytes, and with NumPy
def test_a_snapshot_sees_a_change_of_one_bit_and_a_new_tensor(size: int) -> None:
    from textorch.models.weight_state import WeightSnapshot

    param = nn.Parameter(torch.zeros(size))
    other = nn.Parameter(torch.zeros(size))
    snapshot = WeightSnapshot((param,))
    assert snapshot.matches((param,))
    assert not snapshot.matches((other,))  # equal values, another tensor
    with torch.no_grad():
        param.data[-1] = -0.0  # equal to 0.0 as a number, not as bits
    assert not snapshot.matches((param,))
    param.data = torch.zeros(size)  # the same object, new memory
    assert not WeightSnapshot((other,)).matches((param,))
    assert not snapshot.matches((param,))


def test_within_one_call_each_snapshot_compares_contents_once_and_the_next_call_again() -> None:
    """``one_check_per_call``: a call of many batches checks each kept form once; the next call
    (after a write through ``.data``) compares again and sees the write."""
    from textorch.models import weight_state
    from textorch.models.weight_state import WeightSnapshot, one_check_per_call

    param = nn.Parameter(torch.zeros(5000))
    snapshot = WeightSnapshot((param,))
    compared: list[int] = []
    real = weight_state._Kept.matches

    def counted(self, p):  # noqa: ANN001, ANN202
        compared.append(1)
        return real(self, p)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(weight_state._Kept, "matches", counted)
        with one_check_per_call():
            assert all(snapshot.matches((param,)) for _ in range(5))
            assert not snapshot.matches((nn.Parameter(torch.zeros(5000)),))  # another tensor: never served
        assert len(compared) == 1
        param.data[0] = 1.0
        with one_check_per_call():
            assert not snapshot.matches((param,))
            assert not snapshot.matches((param,))  # a failed check is not remembered
        assert len(compared) == 3
        assert not snapshot.matches((param,))  # outside a call: every time
        assert len(compared) == 4
