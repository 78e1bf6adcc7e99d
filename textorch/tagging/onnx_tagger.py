"""A saved tagger's ONNX export run without PyTorch: ONNX Runtime for the network, NumPy for the rest.

Why: a command that tags a file spends more of a short input's time starting than tagging.
Importing torch alone takes over a second, and loading Numba's CRF kernel most of another
(docs/performance.md), while GROBID's CRF starts in milliseconds. With ``--engine onnx`` the
network already runs in ONNX Runtime; this tagger also reads the model directory, encodes the
input (:class:`~textorch.data.encoding.SequenceEncoder`, the library's one encoder) and decodes
the CRF (:mod:`textorch.models.cpu_decoder`, its NumPy recursions) without importing torch or Numba.

It serves what it can serve exactly as :class:`~textorch.tagging.labeler.SequenceLabeler` with
``--engine onnx`` does (same graph, encoder and CRF rules): a recurrent tagger (no transformer)
whose export in the model directory is current. :meth:`OnnxTagger.open` raises
:class:`~textorch.onnx.opening.NotServed` otherwise, and the owner of the engine choice
(:mod:`textorch.onnx.opening`) loads the ``SequenceLabeler`` instead, which exports first where
needed. Only :mod:`textorch.tagging.opening` opens it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from textorch.data.corpus import TokenSequence
from textorch.data.columns import CallColumns, call_columns
from textorch.data.encoding import EncodedCall, SequenceEncoder
from textorch.data.padding import call_padder
from textorch.data.word_table import WordTable
from textorch.embeddings.lookup import word_source
from textorch.errors import ConfigError, ModelFormatError
from textorch.model_dir import check_labels_fit, load_checked, read_model_config
from textorch.models.architecture_table import RNN_BUILDERS, get_architecture
from textorch.models import cpu_decoder
from textorch.onnx.opening import NotServed
from textorch.onnx.layout import (CRF_FILE, DESCRIPTION_FILE, FORMAT_VERSION, ONNX_FILE, QUANTIZED_FILE,
                                  check_graph_labels, made_from_other_weights, older_int8, older_revision, read_description)
from textorch.onnx.session import feed, input_names, open_session
from textorch.tagging.config import TASK, saved_configs
from textorch.tagging.prediction import Prediction
from textorch.tagging.word_table_calls import WordTableCalls

if TYPE_CHECKING:
    from textorch.train.dist import DistContext

logger = logging.getLogger(__name__)

TEMPLATE_TABLE_WEIGHT = "template_emissions.keys"
"""The weight that holds a ``_TEMPLATE`` tagger's fitted feature table (see
:func:`textorch.tagging.template_choice.load_table`)."""


DECODE_ROWS = 512
"""Sequences whose CRF is decoded in one pass (see :func:`_decoding_groups`)."""
BATCH_TOKENS = 8192
"""Padded tokens of one graph run at most (a batch keeps at least one sequence). Sentences fill
their ``batch_size`` long before it; whole documents (a bibliography, a paper's body) go a few
at a time, so peak memory does not grow with the batch size times the longest document."""
DECODE_TOKENS = 1 << 16
"""Padded tokens of one CRF pass at most (a group keeps at least one batch), for the same reason."""
TYPES_PER_RUN = 4096
"""Token types per run of the character encoder (bounds its memory on a chunk with many types)."""


class OnnxTagger:
    """``predict`` of a :class:`~textorch.tagging.labeler.SequenceLabeler` under ``--engine onnx``,
    for one process, from the model directory and its ONNX export alone."""

    task = TASK

    def __init__(self, encoder: SequenceEncoder, word_table: WordTable | None, session: object,
                 crf: tuple[np.ndarray, np.ndarray, np.ndarray] | None, input_format: str, n_features: int,
                 char_session: object | None = None) -> None:
        self.encoder = encoder
        self.word_table = word_table
        self.session = session
        self.char_session = char_session
        """The export's character encoder (``char-encoder.onnx``), run once per distinct token of a
        call; None: the network reads ``char_ids`` and encodes characters per position."""
        self.input_names = input_names(session)
        self.crf = crf
        """Transitions, start and end scores (float64); None: a softmax tagger."""
        self.input_format = input_format
        self.n_features = n_features
        self._calls = WordTableCalls()

    @classmethod
    def open(cls, directory: str | Path, export_dir: str | Path | None = None, quantized: bool = False,
             cache_dir: str | Path | None = None, threads: int | None = None) -> "OnnxTagger":
        """The tagger of a model directory and its export (``export_dir``, default ``MODEL/onnx``).

        Raises :class:`NotServed` when the directory is not a textorch recurrent tagger or has no
        current export of the graph revision this release makes (the ``SequenceLabeler`` path then
        exports, or reports the problem)."""
        directory = Path(directory)
        config = _config_or_none(directory)
        if config is None or config.get("task") != TASK:
            raise NotServed(f"{directory} is not a textorch tagger directory")
        architecture = (config.get("model") or {}).get("architecture", "")
        try:
            if get_architecture(architecture).uses_transformer:
                raise NotServed(f"{architecture} has a transformer")
        except ConfigError:
            raise NotServed(f"unknown architecture {architecture!r}") from None
        exported = Path(export_dir) if export_dir is not None else directory / "onnx"
        description = _current_description(exported, config, architecture, explicit=export_dir is not None,
                                           quantized=quantized)
        network_file, char_files = _graph_files(description, quantized)
        model_file = exported / network_file
        for path in (model_file, *([exported / char_files["model_file"]] if char_files else [])):
            if not path.is_file():
                raise NotServed(f"{path} is missing")
        saved = load_checked(directory, TASK, RNN_BUILDERS, default_builder="rnn_tagger.v1", arrays="numpy")
        model_config, data_config, input_format, n_features = saved_configs(saved.config, saved.builder)
        encoder = SequenceEncoder.from_json(saved.vocab)
        check_labels_fit(directory, len(encoder.labels.items), saved.state)
        if encoder.templates is not None:
            encoder.templates.use_table(np.ascontiguousarray(saved.state[TEMPLATE_TABLE_WEIGHT]).view(np.uint64))
        word_table = _word_table(saved.config.get("embeddings"), data_config.word_lookup, cache_dir)
        crf = _crf_params(exported) if description.get("decoder", "crf") == "crf" else None
        char_session = _session(exported / char_files["model_file"], threads) if char_files else None
        session = _session(model_file, threads)
        check_graph_labels(session, model_file, len(encoder.labels.items), directory)
        if crf is not None and crf[0].shape != (len(encoder.labels.items),) * 2:
            raise ModelFormatError(f"{exported / CRF_FILE}: transitions of {crf[0].shape[0]} labels, but "
                                   f"{directory / 'vocab.json'} has {len(encoder.labels.items)}; the export is not of this model")
        return cls(encoder, word_table, session, crf, input_format, n_features, char_session)

    def predict(self, sequences: list[TokenSequence], batch_size: int = 32, ctx: DistContext | None = None,
                with_scores: bool = True) -> list[Prediction]:
        """Labels (and with ``with_scores`` each label's posterior) per sequence, in input order.
        Batches are length-sorted within the call; no sequence's labels depend on the others."""
        if ctx is not None and ctx.world_size > 1:
            raise ConfigError("the ONNX Runtime tagger runs in one process; load a SequenceLabeler for several")
        columns = call_columns(sequences, self.encoder.columns_read)
        paths, scores = self.tag_columns(columns, batch_size, with_scores)
        labels = list(map(self.encoder.labels.items.__getitem__, paths.tolist()))
        score_list = scores.tolist() if scores is not None else None
        bounds = np.concatenate([[0], np.cumsum(columns.lengths)]).tolist()
        return [Prediction(labels[a:b], None if score_list is None else score_list[a:b])
                for a, b in zip(bounds[:-1], bounds[1:])]

    def tag_columns(self, columns: CallColumns, batch_size: int = 32,
                    with_scores: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """Label ids (and with ``with_scores`` their posteriors) of every token of sequences given as
        columns (:meth:`SequenceEncoder.encode_call`), end to end: what :meth:`predict` answers,
        for a caller that holds columns rather than sequences (:mod:`textorch.data.row_chunks`)."""
        with self._calls.call(self.word_table):
            word_rows = self.word_table.index if self.word_table is not None else None
            encoded = self.encoder.encode_call(columns, word_rows)
            return self._tag_encoded(encoded, columns.lengths, max(batch_size, 1), with_scores)

    def _tag_encoded(self, encoded: EncodedCall, lengths: np.ndarray, step: int,
                     with_scores: bool) -> tuple[np.ndarray, np.ndarray | None]:
        n_tokens = int(encoded.bounds[-1])
        paths_out = np.zeros(n_tokens, dtype=np.int64)
        scores_out = np.zeros(n_tokens, dtype=np.float32) if with_scores else None
        if not n_tokens:
            return paths_out, scores_out
        type_vectors = self._type_vectors(encoded.type_table)
        order = np.flatnonzero(lengths)[np.argsort(lengths[lengths > 0], kind="stable")]
        for group in _decoding_groups(_token_bounded_batches(order, lengths, step), lengths):
            rows = np.concatenate(group)
            emissions = _stacked([part for span in self._input_spans(encoded, group, lengths)
                                  for part in self._span_emissions(encoded, span, lengths, type_vectors)])
            paths, scores = self._decode(emissions, lengths[rows], with_scores)
            mask = np.arange(paths.shape[1])[None, :] < lengths[rows][:, None]
            at = (encoded.bounds[rows][:, None] + np.arange(paths.shape[1]))[mask]
            paths_out[at] = paths[mask]
            if scores_out is not None and scores is not None:
                scores_out[at] = scores[mask]
        return paths_out, scores_out

    def _type_vectors(self, table: np.ndarray) -> np.ndarray | None:
        """Per token type of the call, what the graph reads of its characters, then a row of zeros
        (where padded positions point): the character encoder's vector, or without a separate
        encoder (``char_ids`` graphs) the type's character ids; None for a graph that reads neither."""
        if self.char_session is None:
            if "char_ids" not in self.input_names:
                return None
            return np.vstack([table, np.zeros((1, table.shape[1]), dtype=table.dtype)])
        parts = [self.char_session.run(["char_vectors"], {"char_rows": table[i:i + TYPES_PER_RUN]})[0]  # type: ignore[attr-defined]
                 for i in range(0, len(table), TYPES_PER_RUN)]
        return np.concatenate([*parts, np.zeros((1, parts[0].shape[1]), dtype=parts[0].dtype)])

    def _input_spans(self, encoded: EncodedCall, group: list[np.ndarray], lengths: np.ndarray) -> list[list[np.ndarray]]:
        """A decoding group's batches gathered into runs of consecutive batches whose graph inputs
        have the same shape past the batch axis (the same longest sequence, and for a graph that
        reads character ids the same widest token), at most :data:`BATCH_TOKENS` tokens a run."""
        reads_chars = "char_ids" in self.input_names
        spans: list[list[np.ndarray]] = []
        shape, rows = None, 0
        for batch in group:
            width = int(lengths[batch].max())
            mine = (width, int(encoded.char_widths[batch].max()) if reads_chars else 0)
            if mine != shape or (rows + len(batch)) * width > BATCH_TOKENS:
                spans.append([])
                shape, rows = mine, 0
            spans[-1].append(batch)
            rows += len(batch)
        return spans

    def _span_emissions(self, encoded: EncodedCall, span: list[np.ndarray], lengths: np.ndarray,
                        type_vectors: np.ndarray | None) -> list[np.ndarray]:
        """``(B, L, labels)`` emissions of each batch of ``span``, one graph run a batch.

        The inputs are gathered once for the span, and each batch's are its rows of them: the
        very arrays gathering each batch alone gives (the span's batches have one shape), for
        one gather a span instead of one a batch (sorted short sequences, dates or names, make
        long runs of batches of one length)."""
        rows = span[0] if len(span) == 1 else np.concatenate(span)
        inputs = self._inputs(encoded, rows, lengths[rows], type_vectors)
        parts, start = [], 0
        for batch in span:
            end = start + len(batch)
            rows_of_batch = {name: array[start:end] for name, array in inputs.items()}  # views: no copy
            parts.append(self.session.run(["emissions"], rows_of_batch)[0])  # type: ignore[attr-defined]
            start = end
        return parts

    def _decode(self, emissions: np.ndarray, lengths: np.ndarray, with_scores: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Label ids (and their posteriors) of rows of ``lengths``, from their emissions."""
        if self.crf is not None:
            # Not the compiled kernel: loading Numba would cost this process more than it decodes.
            return cpu_decoder.crf_paths(emissions, lengths, *self.crf, with_confidence=with_scores, compiled=False)
        return cpu_decoder.softmax_paths(emissions, lengths, with_scores)

    def _inputs(self, encoded: EncodedCall, batch: np.ndarray, lengths: np.ndarray,
                type_vectors: np.ndarray | None) -> dict[str, np.ndarray]:
        """The graph's inputs for one batch (see the export's ``onnx-model.json``), padded with 0
        (character ids and vectors: a row of zeros), only those the graph reads."""
        mask = np.arange(int(lengths.max()))[None, :] < lengths[:, None]
        call = encoded.arrays
        pad = call_padder(call, encoded.bounds[batch], mask)
        wanted = set(self.input_names)
        inputs: dict[str, np.ndarray] = {"mask": mask.astype(np.int64)}
        if "word_vectors" in wanted and self.word_table is not None:
            inputs["word_vectors"] = self.word_table.matrix[pad("word_ids")]
        if "char_ids" in wanted and type_vectors is not None:
            width = int(encoded.char_widths[batch].max())
            inputs["char_ids"] = np.ascontiguousarray(type_vectors[pad("type_ids", len(type_vectors) - 1)][:, :, :width],
                                                      dtype=np.int64)
        if "char_vectors" in wanted and type_vectors is not None:
            inputs["char_vectors"] = type_vectors[pad("type_ids", len(type_vectors) - 1)]
        for name in ("casing_ids", "feature_ids", "template_rows"):
            if name in wanted and getattr(call, name) is not None:
                inputs[name] = pad(name).astype(np.int64, copy=False)  # template rows are int32; the graph reads int64
        return feed(self.input_names, inputs)


def _token_bounded_batches(order: np.ndarray, lengths: np.ndarray, step: int) -> list[np.ndarray]:
    """``order`` (positions sorted by length, shortest first) cut into batches of at most ``step``
    sequences and :data:`BATCH_TOKENS` padded tokens (at least one sequence a batch)."""
    if not len(order) or step * int(lengths[order[-1]]) <= BATCH_TOKENS:  # sentences: count alone decides
        return [order[i:i + step] for i in range(0, len(order), step)]
    batches, start = [], 0
    for end in range(1, len(order) + 1):
        if end == len(order) or end - start >= step or (end + 1 - start) * int(lengths[order[end]]) > BATCH_TOKENS:
            batches.append(order[start:end])
            start = end
    return batches


def _decoding_groups(batches: list[np.ndarray], lengths: np.ndarray) -> list[list[np.ndarray]]:
    """Consecutive batches gathered into groups of at least :data:`DECODE_ROWS` sequences or
    :data:`DECODE_TOKENS` padded tokens (the last may hold fewer), decoded together: the NumPy
    CRF pays a few calls per time step, so one pass over a group's longest length costs far less
    than one per batch."""
    groups: list[list[np.ndarray]] = []
    rows = DECODE_ROWS
    for batch in batches:
        if rows >= DECODE_ROWS or (groups and (rows + len(batch)) * int(lengths[batch[-1]]) > DECODE_TOKENS):
            groups.append([])
            rows = 0
        groups[-1].append(batch)
        rows += len(batch)
    return groups


def _stacked(emissions: list[np.ndarray]) -> np.ndarray:
    """Batches' emissions in one array, each padded (with zeros, never read) to the longest."""
    if len(emissions) == 1:
        return emissions[0]
    out = np.zeros((sum(e.shape[0] for e in emissions), max(e.shape[1] for e in emissions), emissions[0].shape[2]),
                   dtype=emissions[0].dtype)
    start = 0
    for part in emissions:
        out[start:start + part.shape[0], :part.shape[1]] = part
        start += part.shape[0]
    return out


def _config_or_none(directory: Path) -> dict | None:
    try:
        return read_model_config(directory)
    except ModelFormatError:
        return None


def _current_description(exported: Path, config: dict, architecture: str, explicit: bool,
                         quantized: bool = False) -> dict:
    """The export's ``onnx-model.json`` when the export can run as it is: made from the weights the
    model directory holds now, by this format, of this architecture (and, unless the directory
    was named, of the current graph revision and, for ``quantized``, int8 revision, as
    ``--engine onnx`` would otherwise export again)."""
    path = exported / DESCRIPTION_FILE
    try:
        description = read_description(exported)
    except ModelFormatError:
        description = None
    if description is None:
        raise NotServed(f"no readable {path}")
    if description.get("format_version") != FORMAT_VERSION or description.get("task", TASK) != TASK:
        raise NotServed(f"{path}: another format or task")
    if description.get("architecture") != architecture:
        raise NotServed(f"{path}: the export is of another architecture")
    current = config.get("weights_sha256")
    # Stricter than the SequenceLabeler's check: without the labeler's weights at hand, an export
    # whose source is unknown is not run.
    if not description.get("source_weights_sha256") or not current or made_from_other_weights(description, current):
        raise NotServed(f"{path}: exported from other weights")
    if not explicit and older_revision(description):
        raise NotServed(f"{path}: an older graph revision")
    if quantized and not explicit and older_int8(description):
        raise NotServed(f"{path}: no int8 files of the current revision")
    return description


def _graph_files(description: dict, quantized: bool) -> tuple[str, dict | None]:
    """The network's file, and the separate character encoder's description (None: the network
    reads ``char_ids`` itself): the split graphs where the export has them, in int8 with
    ``quantized`` (one int8 graph for an export that has no int8 split network)."""
    char_files = description.get("char_encoder")
    if not quantized:
        return (char_files["network_file"], char_files) if char_files else (ONNX_FILE, None)
    if char_files and char_files.get("quantized_network_file"):
        return char_files["quantized_network_file"], char_files
    return QUANTIZED_FILE, None


def _word_table(described: dict | None, word_lookup: str, cache_dir: str | Path | None) -> WordTable | None:
    if described is None:
        return None
    from textorch.embeddings.for_models import reopen_saved

    return WordTable(word_source(reopen_saved(described, None, cache_dir), word_lookup))


def _crf_params(exported: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    path = exported / CRF_FILE
    try:
        params = json.loads(path.read_text(encoding="utf-8"))
        return tuple(np.asarray(params[k], dtype=np.float64) for k in ("transitions", "start", "end"))  # type: ignore[return-value]
    except (OSError, ValueError, KeyError) as exc:
        raise NotServed(f"{path}: not readable ({exc})") from None


def _session(model_file: Path, threads: int | None) -> object:
    try:
        return open_session(model_file, threads)
    except ImportError:
        raise NotServed("onnxruntime is not installed") from None
    except Exception as exc:  # noqa: BLE001 - any graph ONNX Runtime cannot load (truncated, corrupt)
        raise NotServed(f"{model_file} cannot be loaded ({type(exc).__name__}: {exc})") from None
