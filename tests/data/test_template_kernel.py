"""The compiled loop of template rows gives NumPy's rows, call by call, and stays off where switched off."""

from __future__ import annotations

import random

import numpy as np
import pytest

from textorch.data import template_features, template_kernel
from textorch.data.columns import read_columns
from textorch.data.corpus import TokenSequence
from textorch.data.crf_template import parse_template
from textorch.data.encoding import SequenceEncoder
from textorch.data.template_features import TemplateFeaturizer

TEMPLATE = parse_template(
    "U0:%x[-2,0]\nU1:%x[0,1]\nU2:%x[-1,0]/%x[0,0]\nU3:%x[1,2]/%x[0,0]\nU4:%x[2,1]/%x[-1,2]/%x[0,0]\n"
    "U5:%x[0,0]/%x[0,1]/%x[0,2]\n")
WORDS = "June 3 , 2005 May the of and Smith J. Paris 12 ; : 1999".split()


def _sequences(rng: random.Random, count: int, longest: int) -> list[TokenSequence]:
    out = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, longest))]
        out.append(TokenSequence(words, features=[[w.lower(), rng.choice("ABC"), rng.choice("xyzw")] for w in words]))
    return out


@pytest.mark.skipif(template_kernel.rows_kernel() is None, reason="numba is not available")
@pytest.mark.parametrize("lookup_limit", [template_features.LOOKUP_LIMIT, 0])
@pytest.mark.parametrize("longest", [3, 40, 400])
def test_compiled_rows_equal_numpy_rows(lookup_limit: int, longest: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lookup templates and (limit 0) templates searched in the table; calls of a few tokens
    (ids from lists), of many, and of repeated rows (ids per distinct row)."""
    monkeypatch.setattr(template_features, "LOOKUP_LIMIT", lookup_limit)
    rng = random.Random(longest)
    featurizer = TemplateFeaturizer.fit(_sequences(rng, 30, 12), TEMPLATE)
    for _ in range(5):
        call = _sequences(rng, rng.randint(1, 4), longest)
        call.append(TokenSequence(["Unseen", "June"], features=[["unseen", "Q", "x"], ["june", "A", "y"]]))
        values = read_columns(call, featurizer.feature_columns)
        lengths = np.array([len(s) for s in call], dtype=np.int64)
        expected = featurizer.call_rows(call, values, lengths)
        compiled = featurizer.call_rows(call, values, lengths, compiled=True)
        assert compiled.dtype == expected.dtype == featurizer.row_dtype
        np.testing.assert_array_equal(compiled, expected)
        assert (expected > 0).any() and (expected == 0).any()  # seen and unseen features both met


def test_stacked_ids_equal_the_ids_of_each_column() -> None:
    rng = random.Random(3)
    for call in (_sequences(rng, 2, 5), _sequences(rng, 40, 30)):  # list look-ups, NumPy per column
        values = read_columns(call, [-1, 0, 1, 2])
        indexes = [{w: i + 1 for i, w in enumerate(WORDS[:7])}, {"june": 4}, {"A": 1, "B": 2}, {"x": 1}]
        tokens = sum(map(len, call))
        stacked = values.stacked_ids([-1, 0, 1, 2], indexes, 0, tokens)
        assert stacked.shape == (4, tokens)
        for row, (column, index) in enumerate(zip([-1, 0, 1, 2], indexes)):
            np.testing.assert_array_equal(stacked[row], values.ids(column, index, 0))


def test_switched_off_the_numpy_route_computes_the_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(template_kernel.DISABLE_ENV, "1")
    template_kernel.rows_kernel.cache_clear()
    try:
        assert template_kernel.rows_kernel() is None
        featurizer = TemplateFeaturizer.fit(_sequences(random.Random(1), 10, 6), TEMPLATE)
        call = _sequences(random.Random(2), 3, 6)
        np.testing.assert_array_equal(featurizer.call_rows(call, compiled=True), featurizer.call_rows(call))
    finally:
        template_kernel.rows_kernel.cache_clear()


def test_an_encoder_takes_the_compiled_loop_only_when_its_owner_says() -> None:
    """The torch-free tagger's encoder never loads Numba; a loaded labeler's may (same rows)."""
    rng = random.Random(5)
    train = _sequences(rng, 20, 8)
    for sequence in train:
        sequence.labels = ["O"] * len(sequence)
    encoder = SequenceEncoder.fit(train, [1], templates=TEMPLATE)
    assert encoder.compiled_rows is False
    call = _sequences(rng, 3, 8)
    plain = np.concatenate([e.template_rows for e in encoder.encode_many(call, with_labels=False)])
    encoder.compiled_rows = True
    compiled = np.concatenate([e.template_rows for e in encoder.encode_many(call, with_labels=False)])
    np.testing.assert_array_equal(plain, compiled)
