"""Whole-call column reading (repeated rows numbered once) gives what reading token by token gives."""

from __future__ import annotations

import random
from itertools import chain

import numpy as np
import pytest

from textorch.data import columns
from textorch.data.columns import column_values, read_columns, value_ids
from textorch.data.corpus import TokenSequence
from textorch.data.encoding import SequenceEncoder
from textorch.data.crf_template import parse_template


def _per_token(sequences: list[TokenSequence], wanted: list[int]) -> list[list[str | None]]:
    """The reference: each token's own row, read one token at a time."""
    out: list[list[str | None]] = [[] for _ in wanted]
    for sequence in sequences:
        for i, token in enumerate(sequence.tokens):
            row = sequence.features[i] if sequence.features else []
            for values, column in zip(out, wanted):
                values.append(token if column < 0 else row[column] if column < len(row) else None)
    return out


def _sequences(seed: int, n: int, width: int, values: int, lengths: tuple[int, int] = (0, 6)) -> list[TokenSequence]:
    rng = random.Random(seed)
    made = []
    for _ in range(n):
        length = rng.randint(*lengths)
        tokens = [f"t{rng.randrange(values)}" for _ in range(length)]
        rows = [[f"c{k}v{rng.randrange(values)}" for k in range(width)] for _ in range(length)]
        made.append(TokenSequence(tokens, features=rows))
    return made


CASES = {
    "repeated rows": _sequences(1, 300, 4, 2),
    "distinct rows": _sequences(2, 50, 4, 10_000),
    "one-token sequences": _sequences(3, 40, 3, 2, (1, 1)),
    "empty sequences between": _sequences(4, 60, 3, 3, (0, 2)),
    "no feature column": _sequences(5, 30, 0, 3),
    "no sequence": [],
    "a sequence without features": [*_sequences(6, 5, 3, 2), TokenSequence(["x", "y"]), *_sequences(7, 5, 3, 2)],
    "rows of two widths": [*_sequences(8, 5, 3, 2), *_sequences(9, 5, 5, 2)],
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("wanted", [[-1, 0, 2, 4], [1, 2], [0, 7]])
@pytest.mark.parametrize("fewest", [0, columns.FEWEST_ROWS])
def test_columns_read_for_a_whole_call_equal_the_per_token_values(case: str, wanted: list[int], fewest: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "FEWEST_ROWS", fewest)  # 0: small calls numbered too
    sequences = CASES[case]
    expected = _per_token(sequences, wanted)
    assert column_values(sequences, wanted) == expected
    read = read_columns(sequences, wanted)
    assert [read[column] for column in wanted] == expected
    index = {"t0": 3, "c0v1": 5, "c2v0": 7, "c1v1": 2}  # other values (and None) are unseen: 9
    for column, values in zip(wanted, expected):
        assert np.array_equal(read.ids(column, index, 9), value_ids(values, index, 9))


def test_repeated_rows_are_looked_up_once_each_and_distinct_ones_per_token() -> None:
    assert sum(map(len, CASES["repeated rows"])) >= columns.FEWEST_ROWS
    assert read_columns(CASES["one-token sequences"], [-1, 0]).inverse is None  # too few rows
    repeated = read_columns(CASES["repeated rows"], [-1, 0, 1])
    assert repeated.inverse is not None
    distinct_rows = {(s.tokens[i], *s.features[i]) for s in CASES["repeated rows"] for i in range(len(s))}
    assert len(repeated.values[0]) == len(distinct_rows) < sum(map(len, CASES["repeated rows"])) / 4
    assert read_columns(CASES["distinct rows"], [-1, 0, 1]).inverse is None


def test_a_sequence_cut_at_any_chunk_boundary_encodes_the_same() -> None:
    """Encoding a call in two parts (as a stream's chunks cut it) gives each sequence the ids it
    gets in one call, repeated rows or not, unseen values included."""
    train = CASES["repeated rows"][:100]
    template = parse_template("U00:%x[-1,0]\nU01:%x[0,1]/%x[1,2]\nU02:%x[0,3]\n", "t")
    encoder = SequenceEncoder.fit(train, [0, 2], templates=template)
    test = [*_sequences(10, 80, 4, 3), *CASES["distinct rows"][:20]]
    whole = encoder.encode_many(test, with_labels=False)
    for cut in (1, 37, len(test) - 1):
        parts = encoder.encode_many(test[:cut], with_labels=False) + encoder.encode_many(test[cut:], with_labels=False)
        for a, b in zip(whole, parts):
            assert np.array_equal(a.feature_ids, b.feature_ids)
            assert np.array_equal(a.template_rows, b.template_rows)


def test_encoding_with_and_without_numbered_rows_gives_the_same_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    train = CASES["repeated rows"][:150]
    template = parse_template("U00:%x[0,0]\nU01:%x[-1,1]/%x[0,1]\nU02:%x[1,4]\n", "t")
    encoder = SequenceEncoder.fit(train, [0, 1, 3], templates=template)
    test = list(chain(CASES["repeated rows"][100:], CASES["empty sequences between"]))
    numbered = encoder.encode_many(test, with_labels=False)
    monkeypatch.setattr(columns, "DISTINCT_SHARE", -1.0)  # never number the rows
    assert read_columns(test, [0]).inverse is None
    plain = encoder.encode_many(test, with_labels=False)
    for a, b in zip(numbered, plain):
        assert np.array_equal(a.feature_ids, b.feature_ids)
        assert np.array_equal(a.template_rows, b.template_rows)


@pytest.mark.parametrize("lengths", [(3, 3, 3), (1, 5, 2, 4)])
def test_a_batch_gathered_from_its_call_equals_one_padded_from_its_sequences(lengths: tuple[int, ...]) -> None:
    import dataclasses

    import torch

    from textorch.data.batching import collate

    train = CASES["repeated rows"][:100]
    template = parse_template("U00:%x[-1,0]\nU01:%x[0,1]/%x[1,2]\n", "t")
    encoder = SequenceEncoder.fit(train, [0, 2], templates=template)
    test = [s for s in _sequences(11, 60, 4, 3) if len(s) in lengths][:12]
    encoded = encoder.encode_many(test, with_labels=False, word_rows=lambda tokens: np.arange(len(tokens)) * 7 + 1)
    alone = [dataclasses.replace(item, call=None) for item in encoded]
    types = int(max(item.type_ids.max() for item in encoded)) + 1
    vectors = torch.arange(float((types + 1) * 2)).reshape(types + 1, 2)
    indices = list(range(len(test)))[::-1]
    for token_vectors in (None, vectors):
        gathered = collate(encoded, indices, token_vectors=token_vectors)
        padded = collate(alone, indices, token_vectors=token_vectors)
        for name in ("mask", "casing_ids", "feature_ids", "template_rows", "char_index", "lengths"):
            assert torch.equal(getattr(gathered, name), getattr(padded, name)), name


def test_no_columns_read_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model that reads no feature column (BidLSTM_CRF on GROBID input) gets no values, and the
    tokens' feature rows are not even gathered (that pass alone was a third of such a model's
    encoding)."""
    def gathered(sequences):
        raise AssertionError("feature rows gathered for no column")

    monkeypatch.setattr(columns, "_uniform_rows", gathered)
    sequences = [TokenSequence(["a", "b"], features=[["x", "y"], ["z", "u"]]), TokenSequence(["c"], features=[["w", "v"]])]
    values = read_columns(sequences, [])
    assert values.values == {} and values.inverse is None
