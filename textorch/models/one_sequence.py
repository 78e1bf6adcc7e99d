"""Tagging one sequence on the CPU straight through a BiLSTM-CRF tagger's parts, without a batch.

GROBID's pattern is a stream of one-sequence calls (a date, an author, an affiliation at a
time). Through the batch route such a call builds a batch of one, runs the embedders as modules
over it, asks the recurrent layers about padding and length groups that one row never has, and
transposes every direction's input and output: a large share of a call this small. This route
runs the same operators on the same values for the one row, time-major from the start, so its
labels and scores are the batch route's bit for bit (tested). It serves only what it knows:

* a :class:`SequenceTagger` whose embedders all have a one-sequence form
  (:attr:`Embedder.serves_one_sequence`), whose encoder is an LSTM and whose head a CRF: the
  BiLSTM-CRF family; GRUs, softmax heads and transformers keep the batch route;
* at call time, float32 CPU inference where the LSTM's laid-out weights serve the call
  (:func:`textorch.models.onednn_lstm.run_dtype`), as every one-sequence call runs (``BF16_MIN_ROWS``).

Anywhere else :meth:`OneSequenceTagger.decode` answers None and the batch route runs. Whether a
call may take this route at all is one of its CPU routes (``CpuRoutes.one_sequence``,
:mod:`textorch.models.cpu_routes`; switched off to measure it, or to rule it out when chasing a
difference); the CRF step follows the call's ``crf_kernel`` route as the batch route's does.
"""

from __future__ import annotations

import torch
from torch import nn

from textorch.data.encoding import EncodedSequence
from textorch.data.word_table import WordTable
from textorch.models import heads, onednn_lstm
from textorch.models.cpu_routes import CpuRoutes
from textorch.models.embedders import Embedder
from textorch.models.encoders import RecurrentEncoder
from textorch.models.tagger import SequenceTagger


class OneSequenceTagger:
    """``decode(one encoded sequence)`` for a model that :meth:`of` accepts."""

    def __init__(self, model: SequenceTagger) -> None:
        self.embedders: list[Embedder] = list(model.embedders)
        self.rnn: nn.LSTM = model.encoder.rnn
        self.head: heads.CRFHead = model.head
        self.template_emissions = model.template_emissions

    @classmethod
    def of(cls, model: nn.Module, char_encoder: nn.Module | None) -> "OneSequenceTagger | None":
        """The route for ``model`` (``char_encoder``: the one whose token vectors a call computes),
        or None where the model is not of the BiLSTM-CRF family this route knows."""
        if not isinstance(model, SequenceTagger) or not isinstance(model.head, heads.CRFHead):
            return None
        if not isinstance(model.encoder, RecurrentEncoder) or not isinstance(model.encoder.rnn, nn.LSTM):
            return None
        for embedder in model.embedders:
            if not getattr(embedder, "serves_one_sequence", False):
                return None
            if embedder.reads_token_vectors and embedder is not char_encoder:  # a call computes one table
                return None
        return cls(model)

    def decode(
        self, item: EncodedSequence, word_table: WordTable | None, token_vectors: torch.Tensor | None,
        with_scores: bool, routes: CpuRoutes,
    ) -> tuple[list[int], list[float] | None] | None:
        """Label ids and confidences (None without ``with_scores``) of one sequence of ``T >= 1``
        tokens, as ``SequenceTagger.decode`` gives them for a batch of it under ``routes`` (the
        call's, which took this route); None where this route does not serve the call (then the
        batch route must). ``token_vectors``: the call's character vectors by type id
        (``EncodedData.token_vectors``)."""
        x = self._embedded(item, word_table, token_vectors)
        if x is None or onednn_lstm.run_dtype(self.rnn, x) is not torch.float32:
            return None
        emissions = self.head.emissions(time_major_layers(self.rnn, x)).float().transpose(0, 1)  # (1, T, L)
        if self.template_emissions is not None:
            if item.template_rows is None:
                return None
            emissions = emissions + self.template_emissions(torch.from_numpy(item.template_rows[None]))
        if routes.crf_kernel:
            paths, scores = heads.cpu_crf_paths(self.head.crf, emissions, torch.tensor([len(item)]), with_scores)
        else:
            paths, scores = self.head.crf.best_paths_with_confidence(emissions, torch.ones(1, len(item), dtype=torch.bool),
                                                                     with_scores)
        return paths[0].tolist(), None if scores is None else scores[0].tolist()

    def _embedded(
        self, item: EncodedSequence, word_table: WordTable | None, token_vectors: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """``(T, 1, D)``: the embedders' outputs for the sequence in the model's order
        (``SequenceTagger.embed`` of a batch of it, time-major); None where a part is missing."""
        outputs = []
        for embedder in self.embedders:
            vectors = embedder.one_sequence_vectors(item, word_table, token_vectors)
            if vectors is None:
                return None
            outputs.append(vectors)
        return torch.cat(outputs, dim=-1).unsqueeze(1)


def time_major_layers(rnn: nn.LSTM, h: torch.Tensor) -> torch.Tensor:
    """``(T, B, directions * H)``: every layer of ``rnn`` over time-major ``h`` ``(T, B, D)`` whose
    rows all have ``T`` steps, as oneDNN reads and writes them: the batch-first route transposes
    each direction's input and output. The backward direction reads each row by a flip. Call only
    where :func:`onednn_lstm.applies`."""
    h = h.to(onednn_lstm.call_dtype(), memory_format=torch.contiguous_format)
    for layer in range(rnn.num_layers):
        forward = onednn_lstm.time_major_direction(rnn, h, layer, "")
        if not rnn.bidirectional:
            h = forward
            continue
        backward = onednn_lstm.time_major_direction(rnn, torch.flip(h, dims=(0,)), layer, "_reverse")
        h = torch.cat([forward, torch.flip(backward, dims=(0,))], dim=-1)
    return h
