"""What a long stream of small tagging calls relies on: bounded, linear-time state kept across
calls (the word-vector table, the token-shape cache) and a one-sequence batch equal to a
padded one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from textorch.tagging import word_table_calls
from textorch.data.batching import collate
from textorch.data.corpus import TokenSequence
from textorch.data.encoding import SequenceEncoder
from textorch.data.vocab import Vocabulary
from textorch.data.word_table import WordTable
from textorch.tagging.training import train_sequence_labeler


class _HashedVectors:
    """A vector source whose vector for a word is a pure function of the word."""

    dim = 6

    def __init__(self) -> None:
        self.lookups = 0

    def vector(self, word: str) -> np.ndarray:
        seed = sum(ord(ch) * (i + 1) for i, ch in enumerate(word))
        return np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)

    def lookup(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        self.lookups += 1
        return np.stack([self.vector(w) for w in words]), np.ones(len(words), dtype=bool)


def test_word_table_keeps_every_row_while_growing_past_its_capacity() -> None:
    source = _HashedVectors()
    table = WordTable(source)
    calls = [[f"w{i}", f"w{i + 1}", "shared"] for i in range(0, 3000, 2)]
    ids = [table.index(words) for words in calls]
    assert len(table) == 1 + 3000 + 1  # padding row, w0..w2999, "shared"
    assert not table.matrix[0].any()
    for words, rows in zip(calls, ids):
        assert np.array_equal(table.matrix[rows], np.stack([source.vector(w) for w in words]))
    assert source.lookups == len(calls)  # known words are never looked up again
    table.index(["shared", "w5"])
    assert source.lookups == len(calls)


def test_word_table_reset_only_above_the_limit() -> None:
    table = WordTable(_HashedVectors())
    table.index([f"w{i}" for i in range(100)])
    assert not table.reset_if_larger(101 * 6 * 4)
    assert len(table) == 101
    assert table.reset_if_larger(100 * 6 * 4)
    assert len(table) == 1 and not table.matrix.any()
    rows = table.index(["w7"])
    assert rows.tolist() == [1]


def _vectors_file(tmp_path: Path) -> str:
    words = ["John", "Mary", "lives", "in", "Paris", "Rome", "."] + [f"Town{i}" for i in range(0, 40, 3)]
    rng = np.random.default_rng(1)
    lines = [f"{w} " + " ".join(f"{v:.3f}" for v in rng.normal(size=5)) for w in words]
    path = tmp_path / "vectors.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_predict_bounds_the_word_table_and_tags_the_same(tiny_conll: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    labeler = train_sequence_labeler(tiny_conll, embeddings=_vectors_file(tmp_path), cache_dir=str(tmp_path / "cache"),
                                     max_epoch=1, seed=2, word_hidden=8, char_hidden=4)
    sequences = [TokenSequence(["John", "lives", "in", f"Town{i}", "."]) for i in range(40)]
    expected = labeler.predict(sequences)
    table = labeler.word_table
    assert table is not None
    limit = 20 * table.dim * 4
    monkeypatch.setattr(word_table_calls, "WORD_TABLE_MAX_BYTES", limit)
    got = [labeler.predict([s])[0] for s in sequences]
    assert [p.labels for p in got] == [p.labels for p in expected]
    assert np.allclose([x for p in got for x in p.scores], [x for p in expected for x in p.scores], atol=1e-5)
    # Each call may add its own few words on top of a table at the limit, never more.
    assert len(table) * table.dim * 4 <= limit + 6 * table.dim * 4


def test_token_shape_cache_follows_a_growing_character_vocabulary() -> None:
    encoder = SequenceEncoder(Vocabulary(["a", "b"]), Vocabulary(["O"], with_specials=False), [], [])
    unknown = encoder.chars.unk_id
    before = encoder.encode_many([TokenSequence(["abz", "ab"])], with_labels=False)[0]
    assert before.char_ids[0].tolist() == [encoder.chars.id("a"), encoder.chars.id("b"), unknown]
    encoder.chars.extend(["z"])
    after = encoder.encode_many([TokenSequence(["abz", "ab"])], with_labels=False)[0]
    assert after.char_ids[0, 2] == encoder.chars.id("z") != unknown
    assert np.array_equal(after.char_ids[1], before.char_ids[1])


def test_one_sequence_batch_equals_a_padded_batch(tiny_conll: Path, tmp_path: Path) -> None:
    labeler = train_sequence_labeler(tiny_conll, embeddings=_vectors_file(tmp_path), cache_dir=str(tmp_path / "cache"),
                                     max_epoch=1, seed=4, word_hidden=8, char_hidden=4)
    data = labeler.encode([TokenSequence(["Mary", "lives", "in", "Rome", "."])] * 2)
    alone, doubled = collate(data.encoded, [0], data.word_table), collate(data.encoded, [0, 1], data.word_table)
    for name in ("mask", "char_ids", "casing_ids", "word_vectors", "lengths"):
        assert torch.equal(getattr(alone, name)[0], getattr(doubled, name)[0]), name
    encoder = labeler._char_encoder()
    with torch.inference_mode():
        from textorch.models.embedders import per_token

        assert torch.allclose(per_token(encoder.encode_rows, alone)[0], per_token(encoder.encode_rows, doubled)[0])
    bare = collate(data.encoded, [0], data.word_table, char_rows=False)
    assert bare.char_rows is None and bare.char_index is None and torch.equal(bare.char_ids, alone.char_ids)


def test_labels_only_predictions_equal_scored_ones(tiny_conll: Path, tmp_path: Path) -> None:
    from textorch.tagging.answer import entities

    labeler = train_sequence_labeler(tiny_conll, embeddings=_vectors_file(tmp_path), cache_dir=str(tmp_path / "cache"),
                                     max_epoch=1, seed=5, word_hidden=8, char_hidden=4)
    sequences = [TokenSequence(["Anna", "lives", "in", "Berlin", "."]), TokenSequence(["Peter", "."]), TokenSequence([])]
    for batch_size in (1, 2, 32):
        scored = labeler.predict(sequences, batch_size=batch_size)
        bare = labeler.predict(sequences, batch_size=batch_size, with_scores=False)
        assert [p.labels for p in bare] == [p.labels for p in scored]
        assert all(p.scores is None for p in bare) and all(p.scores is not None for p in scored)
    found = entities(sequences[0], bare[0])
    assert [e["class"] for e in found] == [e["class"] for e in entities(sequences[0], scored[0])]
    assert all("score" not in e for e in found)
