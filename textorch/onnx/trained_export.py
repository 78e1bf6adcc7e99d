"""A model just trained and saved gets its ONNX export, so the fast path needs no export later.

Both tasks' training paths call :func:`export_after_training` right after the model is saved
(``seq train``, ``grobid``/``ner``, the GROBID bridge, ``cls train``, ``train_sequence_labeler``
and ``train_text_classifier`` all end there). Without it the first ``--engine onnx|auto`` use of
the model (a server's start, GROBID's first call) pays the export.

The export is ``MODEL/onnx`` as the engines write it (:func:`textorch.onnx.engine.ensure_export`
finds it current), with the int8 model too, checked against the float one on the model's own
data (:mod:`textorch.onnx.int8_agreement`, recorded for :func:`textorch.onnx.int8_rule.int8_default_allowed`).

The export is a convenience, never a condition of training: whatever goes wrong is one warning
line and the model stays saved (the engines export on first use, as before). Models the engines
would not run with ONNX Runtime are not exported (:func:`training_export_blocker`). A model
trained on a GPU is exported from a CPU copy loaded from what was saved, for ONNX Runtime on the
CPU. In a multi-process run only rank 0 exports, as only it saves.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from textorch.onnx.opening import onnx_model_blocker

if TYPE_CHECKING:
    from textorch.train.dist import DistContext

logger = logging.getLogger(__name__)

DISABLE_ENV = "TEXTORCH_DISABLE_TRAINING_EXPORT"
"""Set to 1 to save trained models without their export (the engines export on first use). The
test suite sets it: it trains many tiny models, each faster than its export and check would be;
the tests of this module set it back."""


def training_export_blocker(predictor) -> str | None:
    """Why a just-trained ``predictor`` gets no export, or None when it does: the engines' rule
    (:func:`textorch.onnx.opening.onnx_model_blocker`), whatever device or precision it was
    trained with (it is exported from a CPU copy)."""
    return onnx_model_blocker(predictor)


def export_after_training(predictor, model_dir: str | Path | None, ctx: DistContext, valid=None, train=None,
                          seed: int = 0) -> Path | None:
    """Export ``predictor``, just saved into ``model_dir``, to ``model_dir/onnx`` with its int8
    model and the int8 check on ``valid`` then ``train`` (a tagger's ``Corpus``, a classifier's
    ``ClsCorpus``). Returns the export directory, or None: not rank 0, no ``model_dir``,
    :data:`DISABLE_ENV` set, a model the engines run in PyTorch (logged), or a failed export (one
    warning). Never raises for an export that fails."""
    if model_dir is None or not ctx.is_main or os.environ.get(DISABLE_ENV, "").strip() not in ("", "0"):
        return None
    reason = training_export_blocker(predictor)
    if reason is not None:
        logger.info("%s: no ONNX export after training: %s", model_dir, reason)
        return None
    # Imported here, not with this module: both front doors import the training paths, which
    # import this module, and every command that loads a model would pay for the exporter.
    from textorch.onnx.engine import default_export_dir, export_model
    from textorch.onnx.int8_agreement import check_int8
    from textorch.onnx.int8_rule import write_check

    started = time.perf_counter()
    try:
        source = predictor
        if predictor.device.type != "cpu":
            source = type(predictor).load(model_dir, device="cpu", embeddings=predictor.embeddings)
        directory = export_model(source, default_export_dir(model_dir), quantize=True, source_dir=model_dir)
    except Exception as exc:  # noqa: BLE001 - any failure: the trained model is saved, the engine exports later
        logger.warning("%s: the model is saved, but its ONNX export failed (%s); the ONNX engine exports it on first "
                       "use", model_dir, _one_line(exc))
        return None
    try:
        check = check_int8(source, directory, valid, train, seed, torch.get_num_threads())
        write_check(directory, check)
    except Exception as exc:  # noqa: BLE001 - without a check the int8 model is simply never the default
        logger.warning("%s: ONNX export written, but the int8 check failed (%s): int8 is not made a default",
                       directory, _one_line(exc))
        return directory
    logger.info("%s: int8 against float on %d %s of the model's data: %.2f %% agree, F1 %+.2f points: %s "
                "(export and check %.1fs)", directory, check.units, check.unit, 100 * check.agreement,
                check.f1_change, check.verdict, time.perf_counter() - started)
    return directory


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"
