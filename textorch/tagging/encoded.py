"""A tagger's input, encoded: the id arrays of each sequence plus the word vectors and
sub-token windows they point into, from which training and inference cut their batches."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from textorch.data.batching import Batch, collate, token_type_table, with_padding_row
from textorch.data.encoding import EncodedSequence
from textorch.data.subwords import WindowCollator
from textorch.data.word_table import WordTable
from textorch.models.embedders import encode_token_types
from textorch.models.token_vector_cache import TokenVectorCache


@dataclass
class EncodedData:
    """Encoded sequences plus the word vectors they index: what the trainer batches from."""

    encoded: list[EncodedSequence]
    word_table: WordTable | None
    windows: WindowCollator | None = None
    """Transformer models: sub-tokens of each sequence, added to batches as encoder windows."""

    def lengths(self) -> list[int]:
        return [len(e) for e in self.encoded]

    def batch(self, indices: list[int], token_vectors: torch.Tensor | None = None, char_rows: bool = True) -> Batch:
        batch = collate(self.encoded, indices, self.word_table, token_vectors, char_rows)
        return self.windows.extend(batch) if self.windows is not None else batch

    def token_vectors(
        self, encoder: torch.nn.Module | None, device: torch.device | str, cache: TokenVectorCache | None = None,
    ) -> torch.Tensor | None:
        """The output of ``encoder`` (the model's character encoder, or None: it has none) for
        every token type here, row = type id, then one row of zeros (the row that padded
        positions of a batch point at: :func:`textorch.data.batching.collate`); ``cache``
        keeps them across calls."""
        table = token_type_table(self.encoded) if encoder is not None else None
        if table is None:
            return None
        if cache is not None:
            vectors = cache.vectors(encoder, table, device)
        else:
            vectors = encode_token_types(encoder, torch.from_numpy(table).to(device))
        return with_padding_row(vectors)
