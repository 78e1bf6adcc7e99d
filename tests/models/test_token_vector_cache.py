"""Character vectors kept across tagging calls: the same answers as computing them afresh, and
never a vector from weights that have changed since."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from textorch.data.corpus import TokenSequence
from textorch.tagging.labeler import SequenceLabeler
from textorch.tagging.training import train_sequence_labeler
from textorch.models.embedders import CharBiLSTMEmbedder, encode_token_types
from textorch.models.token_vector_cache import KEY_WIDTH, TokenVectorCache

from conftest import trained_once

_TRAINED: dict = {}


def _labeler(tiny_conll: Path) -> SequenceLabeler:
    return trained_once(_TRAINED, "conll", lambda: train_sequence_labeler(tiny_conll, max_epoch=2, seed=5, word_hidden=8, char_hidden=4))


def _stream() -> list[TokenSequence]:
    texts = ["John lives in Paris .", "Mary met Peter in Rome", "Anna ☃ Berlin ☂", "Paris , Paris , Madrid", "Zoë ☃"]
    return [TokenSequence(text.split()) for text in texts]


def _fresh(labeler: SequenceLabeler, sequences: list[TokenSequence]) -> list:
    """Predictions with no cache at all, one sequence per call."""
    kept, labeler.token_vector_cache = labeler.token_vector_cache, None
    try:
        return [labeler.predict([s], batch_size=1)[0] for s in sequences]
    finally:
        labeler.token_vector_cache = kept


def _assert_same(got: list, expected: list) -> None:
    assert [p.labels for p in got] == [p.labels for p in expected]
    assert np.allclose([x for p in got for x in p.scores], [x for p in expected for x in p.scores], atol=1e-6)


def test_a_stream_of_one_sequence_calls_reads_repeated_tokens_from_the_cache(tiny_conll: Path) -> None:
    labeler = _labeler(tiny_conll)
    labeler.token_vector_cache = TokenVectorCache()
    stream = _stream()
    expected = _fresh(labeler, stream)
    first = [labeler.predict([s], batch_size=1)[0] for s in stream]
    cache = labeler.token_vector_cache
    misses_after_first_pass = cache.misses
    second = [labeler.predict([s], batch_size=1)[0] for s in stream]
    _assert_same(first, expected)
    _assert_same(second, expected)
    # "Paris" and "in" repeat within the first pass; the second pass computes nothing
    assert cache.hits > 0 and cache.misses == misses_after_first_pass
    # one entry per distinct character sequence (the unknown ☃ and ☂ read the same)
    char_id = labeler.encoder.chars.id
    tokens = {t for s in stream for t in s.tokens}
    distinct = {tuple(char_id(c) for c in t) for t in tokens}
    assert len(cache) == misses_after_first_pass == len(distinct) < len(tokens)
    _assert_same(labeler.predict(stream, batch_size=2), expected)  # batched calls read it too


def test_an_optimizer_step_empties_the_cache_fused_adam_included(tiny_conll: Path) -> None:
    labeler = _labeler(tiny_conll)
    labeler.token_vector_cache = TokenVectorCache()
    stream = _stream()
    before = [labeler.predict([s], batch_size=1)[0] for s in stream]
    char_encoder = labeler._char_encoder()
    params = list(char_encoder.parameters())
    versions = [p._version for p in params]
    saved = {k: v.clone() for k, v in labeler.model.state_dict().items()}
    try:
        optimizer = torch.optim.Adam(params, lr=0.5, fused=True)
        for p in params:
            p.grad = torch.ones_like(p)
        optimizer.step()
        assert [p._version for p in params] == versions  # why version counters alone would not do
        after = [labeler.predict([s], batch_size=1)[0] for s in stream]
        _assert_same(after, _fresh(labeler, stream))
        assert [p.scores for p in after] != [p.scores for p in before]  # the step did change the output
    finally:
        labeler.model.load_state_dict(saved)
    # load_state_dict (an in-place copy) empties it as well: back to the first answers
    _assert_same([labeler.predict([s], batch_size=1)[0] for s in stream], before)


def test_rows_with_the_same_characters_share_one_entry_and_stay_correct() -> None:
    torch.manual_seed(0)
    encoder = CharBiLSTMEmbedder(12, char_dim=5, hidden=3).eval()
    table = np.array([[3, 4, 0], [1, 1, 0], [3, 4, 0], [5, 0, 0], [1, 1, 0], [0, 0, 0]])
    cache = TokenVectorCache()
    with torch.inference_mode():
        expected = encode_token_types(encoder, torch.from_numpy(table))
        got = cache.vectors(encoder, table, "cpu")
        # the same characters in a wider table (another call's padding) are the same tokens
        wider = np.array([[5, 0, 0, 0], [3, 4, 0, 0], [7, 8, 9, 2]])
        again = cache.vectors(encoder, wider, "cpu")
        expected_wider = encode_token_types(encoder, torch.from_numpy(wider))
    assert torch.allclose(got, expected, atol=1e-7)
    assert torch.allclose(again, expected_wider, atol=1e-7)
    assert len(cache) == 5 and cache.misses == 5 and cache.hits == 4
    # wider than the keys' fixed width: a token of 35 characters, next to a short known one
    widest = np.zeros((2, KEY_WIDTH + 8), dtype=np.int64)
    widest[0, :35] = np.arange(35) % 11 + 1
    widest[1, :2] = [3, 4]
    with torch.inference_mode():
        assert torch.allclose(cache.vectors(encoder, widest, "cpu"), encode_token_types(encoder, torch.from_numpy(widest)), atol=1e-7)


def test_the_cache_stays_bounded_and_is_skipped_in_training_mode() -> None:
    torch.manual_seed(1)
    encoder = CharBiLSTMEmbedder(40, char_dim=4, hidden=3).eval()
    cache = TokenVectorCache(max_entries=10)
    rng = np.random.default_rng(0)
    with torch.inference_mode():
        for _ in range(20):
            table = np.zeros((6, 5), dtype=np.int64)
            table[:, :3] = rng.integers(1, 40, size=(6, 3))
            got = cache.vectors(encoder, table, "cpu")
            assert torch.allclose(got, encode_token_types(encoder, torch.from_numpy(table)), atol=1e-7)
            assert len(cache) <= 10
        encoder.train()
        cache.clear()
        cache.vectors(encoder, table, "cpu")
    assert len(cache) == 0


def test_a_cache_never_serves_another_encoder() -> None:
    torch.manual_seed(2)
    first, second = CharBiLSTMEmbedder(12, 5, 3).eval(), CharBiLSTMEmbedder(12, 5, 3).eval()
    table = np.array([[3, 4, 5]])
    cache = TokenVectorCache()
    with torch.inference_mode():
        a = cache.vectors(first, table, "cpu")
        b = cache.vectors(second, table, "cpu")
        assert torch.allclose(b, encode_token_types(second, torch.from_numpy(table)))
    assert not torch.allclose(a, b)


def test_the_cache_works_outside_inference_mode_too() -> None:
    torch.manual_seed(3)
    encoder = CharBiLSTMEmbedder(12, 5, 3).eval()
    cache = TokenVectorCache()
    with torch.inference_mode():
        cache.vectors(encoder, np.array([[3, 4, 5]]), "cpu")
    got = cache.vectors(encoder, np.array([[6, 7, 0], [3, 4, 5]]), "cpu")  # grows the matrix in place
    with torch.no_grad():
        assert torch.allclose(got, encode_token_types(encoder, torch.from_numpy(np.array([[6, 7, 0], [3, 4, 5]]))))
    assert cache.hits == 1 and cache.misses == 2


def test_token_types_run_in_length_sorted_chunks_and_come_back_in_order() -> None:
    torch.manual_seed(3)
    encoder = CharBiLSTMEmbedder(n_chars=20, char_dim=5, hidden=4).eval()
    rng = np.random.default_rng(3)
    widths = rng.integers(1, 9, size=23)
    table = np.zeros((23, 8), dtype=np.int64)
    for row, width in enumerate(widths):
        table[row, :width] = rng.integers(1, 20, size=width)
    table[5] = 0  # an empty row: zeros, wherever sorting puts it
    with torch.no_grad():
        one_by_one = torch.cat([encoder.encode_rows(torch.from_numpy(table[i : i + 1])) for i in range(23)])
        chunked = encode_token_types(encoder, torch.from_numpy(table), chunk=4)
    assert torch.allclose(chunked, one_by_one, atol=1e-6)
    assert chunked[5].abs().sum() == 0 and chunked[4].abs().sum() > 0


def test_character_encoder_takes_no_rows_and_rows_without_characters() -> None:
    encoder = CharBiLSTMEmbedder(n_chars=10, char_dim=3, hidden=2).eval()
    with torch.no_grad():
        assert encoder.encode_rows(torch.zeros((0, 4), dtype=torch.long)).shape == (0, 4)
        only_padding = encoder.encode_rows(torch.zeros((2, 4), dtype=torch.long))
    assert only_padding.shape == (2, 4) and only_padding.abs().sum() == 0
