"""How the torch-free tagger cuts a call: by count for sentences, by padded tokens for documents."""

from __future__ import annotations

import numpy as np

from textorch.tagging.onnx_tagger import BATCH_TOKENS, DECODE_ROWS, DECODE_TOKENS, _decoding_groups, _token_bounded_batches


def _sorted(lengths: np.ndarray) -> np.ndarray:
    return np.argsort(lengths, kind="stable")


def test_sentences_are_cut_by_count_alone() -> None:
    lengths = np.array([5, 30, 12, 7] * 25)
    batches = _token_bounded_batches(_sorted(lengths), lengths, 32)
    assert [len(b) for b in batches] == [32, 32, 32, 4]
    assert np.array_equal(np.concatenate(batches), _sorted(lengths))


def test_documents_go_a_few_at_a_time_within_the_token_budget() -> None:
    lengths = np.array([20_000, 300, 2_500, 2_000, 9_000, 40, 3_000, 2_600])
    order = _sorted(lengths)
    batches = _token_bounded_batches(order, lengths, 32)
    assert np.array_equal(np.concatenate(batches), order)  # every sequence once, shortest first
    for batch in batches:
        padded = len(batch) * int(lengths[batch].max())
        assert padded <= BATCH_TOKENS or len(batch) == 1, (batch, padded)
    assert [len(b) for b in batches][-2:] == [1, 1]  # the 9,000 and 20,000-token documents alone
    assert max(len(b) for b in batches) > 1  # short ones still share a run


def test_decoding_groups_are_bounded_by_rows_and_by_padded_tokens() -> None:
    short = np.full(2_000, 10)
    groups = _decoding_groups(_token_bounded_batches(_sorted(short), short, 32), short)
    assert all(sum(len(b) for b in g) <= DECODE_ROWS + 32 for g in groups) and len(groups) > 1
    long = np.array([5_000] * 40)
    batches = _token_bounded_batches(_sorted(long), long, 32)
    groups = _decoding_groups(batches, long)
    assert [len(np.concatenate(g)) for g in groups] == [13, 13, 13, 1]  # 13 x 5,000 <= 65,536
    assert all(len(np.concatenate(g)) * 5_000 <= DECODE_TOKENS for g in groups)
