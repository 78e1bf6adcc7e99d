"""Template features: each token's rows are those of the CRF++ feature strings, built here the
slow way (strings, as CRF++ and Wapiti build them) to check the vectorised keys against."""

from __future__ import annotations

import numpy as np
import pytest

from textorch.data.corpus import TokenSequence
from textorch.data.crf_template import FeatureTemplate, parse_template
from textorch.data import template_features
from textorch.data.columns import ColumnValues, read_columns
from textorch.data.encoding import SequenceEncoder
from textorch.data.template_features import TemplateFeaturizer, column_value_counts

TEMPLATE = parse_template("U0:%x[-2,0]\nU1:%x[0,1]\nU2:%x[-1,0]/%x[0,0]\nU3:%x[1,2]/%x[0,0]\n")


def _sequence(tokens: str, shape: str) -> TokenSequence:
    words = tokens.split()
    return TokenSequence(words, features=[[w.lower(), s] for w, s in zip(words, shape.split())])


TRAIN = [_sequence("June 3 , 2005", "CAP NUM PUNCT NUM"), _sequence("3 June", "NUM CAP"),
         _sequence("May", "CAP")]


def _rows(featurizer: TemplateFeaturizer, sequences: list[TokenSequence],
          values: ColumnValues | None = None) -> list[np.ndarray]:
    """Per sequence, its ``(L, templates)`` rows, cut from the call's one array."""
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    out = featurizer.call_rows(sequences, values, lengths)
    bounds = np.cumsum(lengths).tolist()
    return [out[a:b] for a, b in zip([0, *bounds[:-1]], bounds)]


def _cell(sequence: TokenSequence, t: int, row: int, column: int) -> str:
    i = t + row
    if i < 0:
        return f"_B{i}"
    if i >= len(sequence):
        return f"_B+{i - len(sequence) + 1}"
    return sequence.tokens[i] if column == 0 else sequence.features[i][column - 1]


def _strings(sequence: TokenSequence, templates: list[FeatureTemplate]) -> list[list[str]]:
    """Per token, per template, the feature string CRF++ would build."""
    return [[t.name + ":" + "/".join(_cell(sequence, i, r, c) for r, c in t.cells) for t in templates]
            for i in range(len(sequence))]


@pytest.mark.parametrize("lookup_limit", [template_features.LOOKUP_LIMIT, 0])
def test_rows_equal_iff_feature_strings_equal_and_unseen_strings_get_row_zero(
        lookup_limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways to a row: lookup arrays, and (limit 0) the table searched for each key."""
    monkeypatch.setattr(template_features, "LOOKUP_LIMIT", lookup_limit)
    featurizer = TemplateFeaturizer.fit(TRAIN, TEMPLATE)
    assert bool(featurizer._lookups) == (lookup_limit > 0)
    train_strings = {f for s in TRAIN for token in _strings(s, TEMPLATE) for f in token}
    assert featurizer.n_rows == len(train_strings) + 1  # one row per distinct training feature
    test = [*TRAIN, _sequence("3 May , 1999", "NUM CAP PUNCT NUM"), _sequence("Unseen", "CAP")]
    row_of: dict[str, int] = {}
    for sequence, rows in zip(test, _rows(featurizer, test)):
        assert rows.shape == (len(sequence), len(TEMPLATE))
        for token_strings, token_rows in zip(_strings(sequence, TEMPLATE), rows.tolist()):
            for string, row in zip(token_strings, token_rows):
                if string not in train_strings:
                    assert row == 0, string
                else:
                    assert row > 0
                    assert row_of.setdefault(string, row) == row, string
    assert len(set(row_of.values())) == len(row_of)  # different strings, different rows
    assert "U0:_B-2" in row_of and "U0:_B-1" in row_of  # both distances before the start
    assert "U3:_B+1/2005" in row_of  # past the end, joined with an inside value


def test_rows_do_not_depend_on_the_other_sequences_of_a_call() -> None:
    featurizer = TemplateFeaturizer.fit(TRAIN, TEMPLATE)
    together = _rows(featurizer, TRAIN)
    for sequence, rows in zip(TRAIN, together):
        assert np.array_equal(_rows(featurizer, [sequence])[0], rows)
    assert _rows(featurizer, []) == []


def test_json_and_table_round_trip() -> None:
    featurizer = TemplateFeaturizer.fit(TRAIN, TEMPLATE)
    loaded = TemplateFeaturizer.from_json(featurizer.to_json())
    assert loaded.n_rows == featurizer.n_rows
    loaded.use_table(featurizer.table.copy())
    other = [_sequence("2005 June 3", "NUM CAP NUM")]
    assert all(np.array_equal(a, b) for a, b in zip(_rows(loaded, other), _rows(featurizer, other)))


def test_a_sequence_without_a_feature_column_reads_unseen_values() -> None:
    featurizer = TemplateFeaturizer.fit(TRAIN, TEMPLATE)
    rows = _rows(featurizer, [TokenSequence(["June", "3"], features=None)])[0]
    assert (rows[:, 1] == 0).all()  # U1 reads feature column 1, which this sequence lacks
    assert (rows[:, 0] > 0).all()  # U0 reads the token two positions back: boundaries, seen in training


def test_column_value_counts_count_the_token_then_each_feature() -> None:
    assert column_value_counts(TRAIN, 3) == [5, 5, 3]


def test_rows_from_values_read_by_the_caller_equal_rows_read_here() -> None:
    featurizer = TemplateFeaturizer.fit(TRAIN, TEMPLATE)
    test = [*TRAIN, _sequence("3 May , 1999", "NUM CAP PUNCT NUM")]
    columns = featurizer.feature_columns
    assert columns == [-1, 0, 1]  # the token and the two feature columns the template reads
    values = read_columns(test, columns)
    for given, read in zip(_rows(featurizer, test, values), _rows(featurizer, test)):
        assert np.array_equal(given, read)


def test_encoding_reads_the_feature_columns_once_for_the_feature_channel_and_the_templates(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from textorch.data import columns, encoding

    calls: list[list[int]] = []
    read_columns = columns.read_columns

    def counted(sequences: list[TokenSequence], wanted: list[int]) -> list:
        calls.append(list(wanted))
        return read_columns(sequences, wanted)

    encoder = encoding.SequenceEncoder.fit(TRAIN, [0, 1], templates=TEMPLATE)
    plain = encoder.encode_many(TRAIN, with_labels=False)
    monkeypatch.setattr(columns, "read_columns", counted)  # what encoding's call_columns reads with
    monkeypatch.setattr(template_features, "read_columns", counted)
    shared = encoder.encode_many(TRAIN, with_labels=False)
    assert calls == [[-1, 0, 1]]
    for a, b in zip(plain, shared):
        assert np.array_equal(a.feature_ids, b.feature_ids) and np.array_equal(a.template_rows, b.template_rows)


def test_rows_are_int32_unless_the_table_outgrows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus's rows are the largest array training keeps: half the memory as int32."""
    featurizer = TemplateFeaturizer.fit(TRAIN, TEMPLATE)
    assert featurizer.row_dtype == np.int32
    assert all(rows.dtype == np.int32 for rows in _rows(featurizer, TRAIN))
    encoded = SequenceEncoder.fit(TRAIN, [], templates=TEMPLATE).encode_many(TRAIN, with_labels=False)
    assert encoded[0].template_rows.dtype == np.int32 and encoded[0].call.template_rows.dtype == np.int32
    monkeypatch.setattr(TemplateFeaturizer, "n_rows", property(lambda self: 1 << 31))
    assert featurizer.row_dtype == np.int64
    assert all(rows.dtype == np.int64 for rows in _rows(featurizer, TRAIN))


@pytest.mark.parametrize("per_pass", [1, 4, 1 << 20])
def test_fitting_reads_a_bounded_number_of_tokens_at_a_time_and_finds_the_same_table(
        per_pass: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys of a pass (whole sequences, about ``FIT_TOKENS_PER_PASS`` tokens) are all that is
    held at once, never a key per template and token of the whole corpus; the table is the same."""
    whole = TemplateFeaturizer.fit(TRAIN, TEMPLATE).table
    corpus = [*TRAIN, _sequence("3 May , 1999", "NUM CAP PUNCT NUM"), _sequence("2005 June 3", "NUM CAP NUM")] * 3
    seen_sizes: list[int] = []
    keys = TemplateFeaturizer._keys

    def counted(self: TemplateFeaturizer, k: int, values: list[np.ndarray]) -> np.ndarray:
        seen_sizes.append(len(values[0]))
        return keys(self, k, values)

    monkeypatch.setattr(template_features, "FIT_TOKENS_PER_PASS", per_pass)
    monkeypatch.setattr(TemplateFeaturizer, "_keys", counted)
    assert np.array_equal(TemplateFeaturizer.fit(TRAIN, TEMPLATE).table, whole)
    seen_sizes.clear()
    fitted = TemplateFeaturizer.fit(corpus, TEMPLATE)
    longest, tokens = max(map(len, corpus)), sum(map(len, corpus))
    assert max(seen_sizes) <= min(per_pass + longest, tokens)
    assert sum(seen_sizes) == tokens * len(TEMPLATE)  # every token's keys, once
    monkeypatch.setattr(template_features, "FIT_TOKENS_PER_PASS", 1 << 20)
    assert np.array_equal(TemplateFeaturizer.fit(corpus, TEMPLATE).table, fitted.table)
