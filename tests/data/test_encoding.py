"""``SequenceEncoder.encode_many``: the whole-call NumPy encoding (token types, character table,
word rows) equals a token-by-token encoding."""

from __future__ import annotations

import numpy as np
import pytest
from short_sequences import short_sequences

from textorch.data import encoding
from textorch.data.batching import collate, token_type_table
from textorch.data.corpus import TokenSequence
from textorch.data.encoding import SequenceEncoder, casing_class


def test_encode_many_shares_token_types() -> None:
    sequences = short_sequences()
    encoder = SequenceEncoder.fit(sequences, [])
    encoded = encoder.encode_many(sequences, with_labels=False)
    types = {}
    for sequence, item in zip(sequences, encoded):
        for token, type_id in zip(sequence.tokens, item.type_ids):
            assert types.setdefault(token, int(type_id)) == int(type_id)
    assert sorted(types.values()) == list(range(len(set(types))))
    table = token_type_table(encoded)
    for token, type_id in types.items():
        assert [encoder.chars.items[i] for i in table[type_id] if i] == list(token)
    single = encoder.encode(sequences[0], with_labels=False)
    assert np.array_equal(single.char_ids, encoded[0].char_ids) and np.array_equal(single.casing_ids, encoded[0].casing_ids)


def test_encode_many_equals_a_token_by_token_encoding() -> None:
    """The whole-call NumPy encoding against the plain definition: per token, its character ids
    (cut at max_char_length, unknown characters -> <unk>), casing class, feature ids and label."""
    rows = [("John", "Xxxx", "B-PER"), ("lives", "xxxx", "O"), ("in", "xx", "O"), ("Paris", "Xxxx", "B-LOC")]
    train = [TokenSequence([t for t, _, _ in rows], [lab for _, _, lab in rows], [[t, f] for t, f, _ in rows])]
    encoder = SequenceEncoder.fit(train, [1], max_char_length=6)
    texts = [["John", "☃☃", "Paris"], [], ["Supercalifragilistic", "in", "1999", "UN", "☃☃"], ["in"]]
    sequences = [TokenSequence(tokens, ["B-PER"] + ["O"] * (len(tokens) - 1) if tokens else [],
                               [[t, "Xxxx" if t[:1].isupper() else "zz"] for t in tokens]) for tokens in texts]
    sequences.append(TokenSequence(["no", "features"], None, None))
    encoded = encoder.encode_many(sequences, with_labels=True)
    types: dict[str, int] = {}
    for sequence, item in zip(sequences, encoded):
        chars = [[encoder.chars.id(c) for c in token[:6]] for token in sequence.tokens]
        width = max([len(c) for c in chars] + [1])
        expected_chars = np.zeros((len(chars), width), dtype=np.int64)
        for row, ids in enumerate(chars):
            expected_chars[row, : len(ids)] = ids
        assert item.char_ids.shape == expected_chars.shape and np.array_equal(item.char_ids, expected_chars)
        assert item.casing_ids.tolist() == [casing_class(t) for t in sequence.tokens]
        assert item.type_ids.tolist() == [types.setdefault(t, len(types)) for t in sequence.tokens]
        features = [[encoder.features[0].id(f[1])] for f in sequence.features or [[t, "<pad>"] for t in sequence.tokens]]
        if sequence.features is None:
            features = [[0] for _ in sequence.tokens]
        assert item.feature_ids.tolist() == features
        labels = None if sequence.labels is None else [encoder.labels.id(lab) for lab in sequence.labels]
        assert (None if item.label_ids is None else item.label_ids.tolist()) == labels
    assert encoded[1].char_ids.shape == (0, 1) and len(encoded[1]) == 0
    assert encoded[2].char_ids.shape == (5, 6)  # "Supercalifragilistic" cut to 6 characters
    assert encoder.encode_many([], with_labels=False) == []


@pytest.mark.parametrize("n_sequences", [1, 40])  # up to and past SMALL_TABLE_ROWS token types
def test_encode_many_gives_each_token_its_word_row_and_characters(n_sequences: int) -> None:
    """Word rows looked up once per token type, then spread to every token, equal the rows of a
    per-token lookup; the character table built in one masked copy (many types) or row by row
    (few) holds each token's characters."""
    words = [f"w{i}x{'y' * (i % 7)}" for i in range(60)]
    sequences = [TokenSequence(tokens=[words[(3 * s + k) % 60] for k in range(s % 5 + 1)] + ["the"], labels=None,
                               features=None) for s in range(n_sequences)]
    encoder = SequenceEncoder.fit(sequences, [])
    looked_up: list[list[str]] = []
    rows = {word: 100 + i for i, word in enumerate(sorted({t for s in sequences for t in s.tokens}))}

    def word_rows(tokens: list[str]) -> np.ndarray:
        looked_up.append(tokens)
        return np.array([rows[t] for t in tokens], dtype=np.int64)

    encoded = encoder.encode_many(sequences, with_labels=False, word_rows=word_rows)
    assert len(looked_up) == 1 and sorted(looked_up[0]) == sorted(rows)  # each type once
    assert (encoded[0].type_table.shape[0] > encoding.SMALL_TABLE_ROWS) == (n_sequences == 40)
    for sequence, item in zip(sequences, encoded):
        assert item.word_ids.tolist() == [rows[t] for t in sequence.tokens]
        for token, chars in zip(sequence.tokens, item.char_ids):
            assert chars.tolist() == [encoder.chars.id(c) for c in token] + [0] * (len(chars) - len(token))


def test_token_type_table_of_one_call_holds_each_tokens_character_ids() -> None:
    """``token_type_table`` returns the table ``encode_many`` kept, whose row of each token type
    holds that token's character ids (the sequences' own ``char_ids``, gathered lazily from it),
    empty sequences included; sequences of two calls have no common table."""
    sequences = short_sequences()
    sequences.insert(1, TokenSequence(tokens=[], labels=None, features=None))
    encoder = SequenceEncoder.fit(sequences, [])
    encoded = encoder.encode_many(sequences, with_labels=False)
    kept = token_type_table(encoded)
    assert kept is encoded[0].type_table
    assert kept.shape[0] == len({t for s in sequences for t in s.tokens})
    for sequence, item in zip(sequences, encoded):
        assert item.char_ids.shape == (len(sequence), max([len(t) for t in sequence.tokens], default=1))
        for token, type_id, row in zip(sequence.tokens, item.type_ids, item.char_ids):
            expected = [encoder.chars.id(ch) for ch in token]
            assert row[: len(token)].tolist() == expected and not row[len(token):].any()
            assert kept[type_id, : len(token)].tolist() == expected and not kept[type_id, len(token):].any()
    other_call = encoder.encode_many(sequences[:1], with_labels=False)
    assert token_type_table(encoded[:1] + other_call) is None
    # nor do their batches share distinct-token rows: each position is encoded on its own
    mixed = collate(encoded[:1] + other_call, [0, 1])
    assert mixed.char_rows is None and mixed.char_index is None and mixed.char_ids.shape[:2] == (2, 5)
