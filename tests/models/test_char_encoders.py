"""Character encoders run once per distinct token (per batch or per tagging call) give what they
give run once per position."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from short_sequences import short_sequences

from textorch.data.batching import collate, token_type_table, with_padding_row
from textorch.data.encoding import SequenceEncoder
from textorch.models.embedders import CharBiLSTMEmbedder, CharCNNEmbedder
from textorch.tagging.training import train_sequence_labeler


@pytest.mark.parametrize("embedder_class", [CharBiLSTMEmbedder, CharCNNEmbedder])
def test_character_encoders_per_distinct_token_equal_per_position(embedder_class: type) -> None:
    sequences = short_sequences()
    encoder = SequenceEncoder.fit(sequences, [])
    encoded = encoder.encode_many(sequences, with_labels=False)
    torch.manual_seed(1)
    embedder = embedder_class(len(encoder.chars.items)).eval()
    batch = collate(encoded, [0, 1, 2, 3])
    assert batch.char_rows is not None and batch.char_rows.shape[0] == len({t for s in sequences for t in s.tokens})
    per_position = embedder.encode_rows(batch.char_ids.reshape(-1, batch.char_ids.shape[2])).reshape(4, batch.mask.shape[1], -1)
    per_position = per_position * batch.mask.unsqueeze(-1)
    with torch.no_grad():
        assert torch.allclose(embedder(batch), per_position, atol=1e-6)
        table = torch.from_numpy(token_type_table(encoded))
        whole_call = collate(encoded, [3, 0], token_vectors=with_padding_row(embedder.encode_rows(table)))
        assert torch.allclose(embedder(whole_call), per_position[[3, 0]], atol=1e-6)


def test_tagging_with_whole_call_token_vectors_equals_one_sequence_at_a_time(tiny_conll: Path) -> None:
    labeler = train_sequence_labeler(tiny_conll, max_epoch=2, seed=3, word_hidden=8, char_hidden=4)
    sequences = [s for s in short_sequences()]
    together = labeler.predict(sequences, batch_size=3)
    alone = [labeler.predict([s], batch_size=1)[0] for s in sequences]
    assert [p.labels for p in together] == [p.labels for p in alone]
    assert np.allclose([x for p in together for x in p.scores], [x for p in alone for x in p.scores], atol=1e-5)
