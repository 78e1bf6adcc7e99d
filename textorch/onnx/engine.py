"""ONNX Runtime as the network runner of a loaded tagger or classifier: the runners, and the
export they run (made, found, or made again).

Which runner a model gets is decided in :mod:`textorch.onnx.opening`, the one owner of that
choice; this module is its machinery and is imported by nothing else that tags or classifies.
Only the network runs in ONNX Runtime here: a tagger's emissions are decoded by the one CPU
decoder (:func:`textorch.models.cpu_decoder.crf_paths`, with the loaded head's parameters, or its
softmax), and a classifier's logits go through ``TextClassifier.predict`` as the PyTorch ones do.
(The torch-free tagger, :mod:`textorch.tagging.onnx_tagger`, runs the same graph and decoder
without a loaded model.)
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from textorch.errors import ConfigError, ModelFormatError
from textorch.models import cpu_decoder
from textorch.models.heads import CRFHead
from textorch.models.costs import AUTO_ONNX_MAX_LENGTH, AUTO_ONNX_MAX_TOKENS, ONNX_GROUP_COSTS
from textorch.onnx.files import (
    DESCRIPTION_FILE,
    FORMAT_VERSION,
    ONNX_FILE,
    QUANTIZED_FILE,
    ExportWriteError,
    source_checksum,
)
from textorch.onnx.layout import check_graph_labels, made_from_other_weights, older_int8, older_revision, read_description
from textorch.onnx.session import feed, input_names, open_session

logger = logging.getLogger(__name__)

class _Session:
    """An ONNX Runtime CPU session fed by input name from whatever tensors a batch has."""

    def __init__(self, model_file: Path, threads: int | None = None) -> None:
        self.session = open_session(model_file, threads)
        self.input_names = input_names(self.session)
        self.model_file = model_file

    def run(self, output: str, available: dict[str, torch.Tensor | np.ndarray | None]) -> np.ndarray:
        return self.session.run([output], feed(self.input_names, available))[0]


class OnnxRunner(_Session):
    """``decode(batch) -> (label ids, scores)`` like ``SequenceTagger.decode``, via onnxruntime.

    Emissions stay NumPy arrays from the session to the CRF
    (:func:`textorch.models.cpu_decoder.crf_paths`, the decoder the PyTorch engine runs on the CPU) with the CRF parameters read once: on
    one-sentence calls the tensor round trips cost as much as the CRF itself.
    """

    group_costs = ONNX_GROUP_COSTS
    """How tagging cuts batches for this engine (:mod:`textorch.models.inference_batches`)."""

    def __init__(self, model_file: Path, head: torch.nn.Module, threads: int | None = None) -> None:
        super().__init__(model_file, threads)
        self.head = head
        self.crf_params = None
        if isinstance(head, CRFHead):
            crf = head.crf
            self.crf_params = tuple(p.detach().cpu().numpy().astype(np.float64)
                                    for p in (crf.transitions, crf.start_transitions, crf.end_transitions))

    def emissions(self, batch) -> np.ndarray:
        """``(B, L, labels)`` emissions of one graph call (padded positions are never read)."""
        names = ("word_vectors", "char_ids", "casing_ids", "feature_ids", "template_rows", "mask")
        rows = getattr(batch, "template_rows", None)  # int32 in a batch; the graph reads int64
        feed = dict(zip(names, [batch.word_vectors, batch.char_ids, batch.casing_ids, batch.feature_ids,
                                None if rows is None else rows.long(), batch.mask.long()]))
        window_ids = getattr(batch, "window_ids", None)
        if window_ids is not None:
            feed.update(input_ids=window_ids, attention_mask=batch.window_mask, word_index=batch.word_index)
        return self.run("emissions", feed)

    def decode_one(self, item, word_table, with_scores: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`decode` of a call of one sequence (an ``EncodedSequence`` of at least one
        token), fed from its arrays as they are: no batch, no tensors (a GROBID-sized call's
        batch and its conversions cost about what its graph run does)."""
        rows = item.template_rows
        arrays = {"char_ids": item.char_ids[None], "casing_ids": item.casing_ids[None],
                  "feature_ids": None if item.feature_ids is None else item.feature_ids[None],
                  "template_rows": None if rows is None else rows.astype(np.int64, copy=False)[None],
                  "mask": np.ones((1, len(item)), dtype=np.int64)}
        if item.word_ids is not None and word_table is not None:
            arrays["word_vectors"] = word_table.matrix[item.word_ids][None]
        emissions = self.run("emissions", arrays)
        lengths = np.array([len(item)], dtype=np.int64)
        if self.crf_params is not None:
            return cpu_decoder.crf_paths(emissions, lengths, *self.crf_params, with_confidence=with_scores)
        return cpu_decoder.softmax_paths(emissions, lengths, with_scores)

    def decode(self, batch, with_scores: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        emissions = self.emissions(batch)
        mask = batch.mask.cpu().numpy()
        if self.crf_params is not None:
            return cpu_decoder.crf_paths(emissions, mask.sum(axis=1), *self.crf_params, with_confidence=with_scores)
        return cpu_decoder.softmax_paths(emissions, mask.sum(axis=1), with_scores)


class OnnxClassifierRunner(_Session):
    """``logits(batch)`` (B, C) of the whole ensemble, like ``ClassifierEnsemble(batch)``."""

    def logits(self, batch) -> torch.Tensor:
        mask = batch.mask.long()
        return torch.from_numpy(self.run("logits", {
            "token_ids": batch.token_ids, "word_vectors": batch.word_vectors, "mask": mask,
            "input_ids": batch.token_ids, "attention_mask": mask,
        }))


class AutoRunner:
    """``--engine auto``: ONNX Runtime for calls of few tokens in sequences none of them long
    (one-sequence requests, a server's small batches), PyTorch for the rest
    (:data:`AUTO_ONNX_MAX_TOKENS`, :data:`AUTO_ONNX_MAX_LENGTH`). Both engines give the same
    labels and scores within 1e-4 (tested), so the choice is one of speed only."""

    def __init__(self, onnx_runner: OnnxRunner, max_tokens: int = AUTO_ONNX_MAX_TOKENS,
                 max_length: int = AUTO_ONNX_MAX_LENGTH) -> None:
        self.onnx_runner = onnx_runner
        self.max_tokens = max_tokens
        self.max_length = max_length

    def runner_for(self, n_tokens: int, longest: int) -> OnnxRunner | None:
        """The runner for a call of ``n_tokens`` tokens whose longest sequence has ``longest``;
        None: the PyTorch network."""
        return self.onnx_runner if n_tokens <= self.max_tokens and longest <= self.max_length else None


def default_export_dir(model_dir: str | Path) -> Path:
    return Path(model_dir) / "onnx"


def export_model(predictor, output: str | Path, quantize: bool = False, source_dir: str | Path | None = None) -> Path:
    """Export a loaded ``SequenceLabeler`` or ``TextClassifier`` (see docs/onnx.md)."""
    if _task(predictor) == "text_classification":
        from textorch.onnx.classifier import export_classifier

        return export_classifier(predictor, output, quantize, source_dir)
    from textorch.onnx.export import export_labeler

    return export_labeler(predictor, output, quantize, source_dir)


def _task(predictor) -> str:
    """The predictor's task, asked of the object so that this shared engine imports neither task package."""
    task = getattr(predictor, "task", None)
    if task not in ("sequence_labelling", "text_classification"):
        raise ConfigError(f"ONNX export does not know a {type(predictor).__name__}")
    return task


def _temporary_export(predictor, model_dir: str | Path, quantize: bool, why: ExportWriteError | None = None) -> Path:
    """An export in a fresh temporary directory, removed when the process ends (read-only models)."""
    directory = Path(tempfile.mkdtemp(prefix="textorch-onnx-")) / "onnx"
    atexit.register(shutil.rmtree, directory.parent, True)
    reason = f" ({why})" if why is not None else ""
    logger.warning("%s is not writable%s: exporting to ONNX in %s (removed at exit)", model_dir, reason, directory)
    return export_model(predictor, directory, quantize, model_dir)


def ensure_export(predictor, model_dir: str | Path, export_dir: str | Path | None = None, quantize: bool = False) -> Path:
    """The export directory to run, exporting first when needed.

    Without ``export_dir``: ``MODEL/onnx``, exported there when absent or made from older
    weights, or into a temporary directory when the model directory is read-only. With it: that
    directory, exported when absent; an export there of other weights is an error.
    """
    explicit = export_dir is not None
    directory = Path(export_dir) if explicit else default_export_dir(model_dir)
    description = read_description(directory)
    if description is not None and made_from_other_weights(description, source_checksum(model_dir)):
        if explicit:
            raise ModelFormatError(f"{directory}: exported from other weights than {model_dir} holds now; export again")
        logger.info("%s was exported from older weights: exporting again", directory)
        description = None
    if description is not None and not explicit and older_revision(description):
        logger.info("%s was exported by an older textorch (slower graph): exporting again", directory)
        description = None
    if description is not None and quantize and not explicit and (
            not (directory / QUANTIZED_FILE).exists() or older_int8(description)):
        logger.info("%s has no current int8 model: exporting again with --quantize", directory)
        description = None
    if description is None:
        logger.info("no ONNX export in %s: exporting now", directory)
        try:
            export_model(predictor, directory, quantize, model_dir)
        except (ExportWriteError, OSError) as exc:  # a read-only model directory (EACCES, EROFS), a full disk
            why = exc if isinstance(exc, ExportWriteError) else ExportWriteError(directory, exc)
            if explicit:
                raise ConfigError(f"--onnx-dir {why}") from None
            return _temporary_export(predictor, model_dir, quantize, why)
    return directory


def attach_onnx(predictor, model_dir: str | Path, export_dir: str | Path | None = None, quantized: bool = False,
                threads: int | None = None) -> Path:
    """Make ``predictor`` (a tagger or a classifier) run its network with ONNX Runtime.

    Returns the export directory used (see :func:`ensure_export` for where it comes from).
    ``predictor.runner = None`` switches back to PyTorch.
    """
    task = _task(predictor)
    directory = ensure_export(predictor, model_dir, export_dir, quantized)
    description = read_description(directory) or {}
    if description.get("format_version") != FORMAT_VERSION:
        raise ModelFormatError(f"{directory}/{DESCRIPTION_FILE}: unknown format version {description.get('format_version')!r}")
    if description.get("task", "sequence_labelling") != task:
        raise ModelFormatError(f"{directory}: the export is of a {description.get('task')} model, not a {task} model")
    if description.get("architecture") != predictor.model_config.architecture:
        raise ModelFormatError(f"{directory}: the export is of a {description.get('architecture')} model, not this one")
    model_file = directory / (QUANTIZED_FILE if quantized else ONNX_FILE)
    if not model_file.exists():
        raise ModelFormatError(f"{model_file}: missing (export with --quantize to get the int8 model)")
    try:
        runner = _runner(predictor, task, model_file, threads)
    except Exception as exc:  # noqa: BLE001 - any graph ONNX Runtime cannot load (truncated, corrupt)
        if export_dir is not None:
            raise ModelFormatError(f"{model_file}: ONNX Runtime cannot load it ({_why(exc)}); export the model again") from None
        # The export is textorch's own (MODEL/onnx): made again from the weights, as when it is stale.
        logger.warning("%s cannot be loaded (%s): exporting again", model_file, _why(exc))
        try:
            directory = export_model(predictor, directory, quantized, model_dir)
        except (ExportWriteError, OSError) as exc:
            why = exc if isinstance(exc, ExportWriteError) else ExportWriteError(directory, exc)
            directory = _temporary_export(predictor, model_dir, quantized, why)
        model_file = directory / model_file.name
        try:
            runner = _runner(predictor, task, model_file, threads)
        except Exception as again:  # noqa: BLE001
            raise ModelFormatError(f"{model_file}: ONNX Runtime cannot load it, exported again ({_why(again)})") from None
    if task != "text_classification":
        check_graph_labels(runner.session, model_file, len(predictor.encoder.labels.items), model_dir)
    predictor.runner = runner
    return directory


def _runner(predictor, task: str, model_file: Path, threads: int | None) -> _Session:
    # No thread count given: the session takes PyTorch's, which the caller may have limited for
    # this process (ONNX Runtime's own default is every core, each spinning between its calls).
    threads = threads or torch.get_num_threads()
    if task == "text_classification":
        return OnnxClassifierRunner(model_file, threads)
    return OnnxRunner(model_file, predictor.model.head, threads)


def _why(exc: BaseException) -> str:
    """ONNX Runtime's reason on one line (its messages may hold several)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"
