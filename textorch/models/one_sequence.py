"""Tagging one sequence on the CPU straight through a BiLSTM-CRF tagger's parts, without a batch.

GROBID's pattern is a stream of one-sequence calls (a date, an author, an affiliation at a time).
Through the batch path such a call builds a padded batch of one, runs the embedders as modules
over it, asks the recurrent layers about padding and length groups that one row
never has, and cuts the call into batches: a noticeable share of a one-sequence call
(docs/performance.md). This path runs the same operators on the same values for the one row, time-major
from the start, so its labels and scores are the batch path's bit for bit (tested), and it
serves only what it knows:

* a :class:`SequenceTagger` whose embedders all serve one-sequence calls (each embedder's
  ``one_sequence_vectors``: word vectors, a character encoder read through the call's token
  vectors, casing, feature columns), whose encoder is an LSTM and whose head a CRF (every
  BiLSTM-CRF family architecture; GRUs, softmax heads and transformers keep the batch path);
* at call time, where the LSTM's laid-out weights serve the call (:func:`textorch.models.onednn_lstm.run_dtype`:
  CPU inference in float32), which a one-sequence call always runs in (``BF16_MIN_ROWS``).

Anywhere else :meth:`OneSequenceTagger.decode` answers None and the batch path runs.
"""

from __future__ import annotations

import torch
from torch import nn

from textorch.data.encoding import EncodedSequence
from textorch.data.word_table import WordTable
from textorch.models import onednn_lstm
from textorch.models.embedders import Embedder
from textorch.models.encoders import RecurrentEncoder
from textorch.models.heads import CRFHead
from textorch.models.time_major_rnn import time_major_layers
from textorch.models.tagger import SequenceTagger


class OneSequenceTagger:
    """``decode(one encoded sequence)`` for a model that :meth:`of` accepts."""

    def __init__(self, model: SequenceTagger) -> None:
        self.embedders: list[Embedder] = list(model.embedders)
        self.rnn: nn.LSTM = model.encoder.rnn
        self.head: CRFHead = model.head

    @classmethod
    def of(cls, model: nn.Module, char_encoder: nn.Module | None) -> "OneSequenceTagger | None":
        """The path for ``model`` (``char_encoder``: the one whose token vectors a call computes),
        or None where the model is not of the BiLSTM-CRF family this path knows."""
        if not isinstance(model, SequenceTagger) or not isinstance(model.head, CRFHead):
            return None
        if not isinstance(model.encoder, RecurrentEncoder) or not isinstance(model.encoder.rnn, nn.LSTM):
            return None
        for embedder in model.embedders:
            if not getattr(embedder, "serves_one_sequence", False):
                return None
            if embedder.reads_token_vectors and embedder is not char_encoder:  # the call computes one table
                return None
        return cls(model)

    def decode(
        self, item: EncodedSequence, word_table: WordTable | None, token_vectors: torch.Tensor | None,
        with_scores: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """Label ids ``(1, T)`` and confidences ``(1, T)`` (None without ``with_scores``) of one
        sequence of ``T >= 1`` tokens, as ``SequenceTagger.decode`` gives them for a batch of it;
        None where this path does not serve the call (then the batch path must).
        ``token_vectors``: the call's character vectors by type id (``EncodedData.token_vectors``)."""
        x = self._embedded(item, word_table, token_vectors)
        if x is None or onednn_lstm.run_dtype(self.rnn, x) is not torch.float32:
            return None
        emissions = self.head.emissions(time_major_layers(self.rnn, x, None)).float().transpose(0, 1)
        return self.head.crf.cpu_best_paths(emissions, torch.tensor([len(item)]), with_scores)

    def _embedded(
        self, item: EncodedSequence, word_table: WordTable | None, token_vectors: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """``(T, 1, D)``: the embedders' outputs for the sequence, concatenated in the model's
        order (``SequenceTagger.embed`` of a batch of it, time-major); None where a part is
        missing (the batch path then reports it)."""
        outputs = []
        for embedder in self.embedders:
            vectors = embedder.one_sequence_vectors(item, word_table, token_vectors)
            if vectors is None:
                return None
            outputs.append(vectors)
        return torch.cat(outputs, dim=-1).unsqueeze(1)
