"""The models a server holds: naming (``--model NAME=DIR``), loading, and what ``/models`` shows."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from textorch.errors import ConfigError, ModelFormatError
from textorch.model_dir import read_model_config

logger = logging.getLogger(__name__)

TAGGER = "tagger"
CLASSIFIER = "classifier"
_TASK_KINDS = {"sequence_labelling": TAGGER, "text_classification": CLASSIFIER, "classification": CLASSIFIER}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class ServedModel:
    """One loaded model and the facts about it that clients may want (``GET /models``)."""

    name: str
    kind: str
    """``tagger`` or ``classifier``: which endpoint serves it."""
    predictor: Any
    """A ``SequenceLabeler`` or a ``TextClassifier``."""
    directory: str
    engine: str = "pytorch"
    """What runs the network: ``pytorch``, ``onnx`` (``serve --engine onnx``) or ``auto`` (ONNX
    Runtime where it is faster, see :func:`textorch.onnx.engine.attach_auto`; ``pytorch`` when
    ``--engine auto`` found no ONNX model to use)."""

    def describe(self) -> dict[str, Any]:
        predictor = self.predictor
        info: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "architecture": _architecture(predictor),
            "labels": _labels(predictor),
            "device": str(getattr(predictor, "device", "cpu")),
            "engine": self.engine,
            "precision": getattr(predictor, "precision", "fp32"),
        }
        if self.kind == TAGGER:
            info["n_features"] = predictor.n_features
            info["uses_features"] = bool(predictor.encoder.feature_columns)
            info["input_format"] = predictor.input_format
        return info


def _architecture(predictor: Any) -> str:
    config = getattr(predictor, "model_config", None)
    return str(getattr(config, "architecture", type(predictor).__name__))


def _labels(predictor: Any) -> list[str]:
    for attribute in ("label_names", "classes"):
        value = getattr(predictor, attribute, None)
        if isinstance(value, (list, tuple)):
            return [str(v) for v in value]
    return []


def parse_model_spec(spec: str) -> tuple[str, Path]:
    """``DIR`` (named after the directory) or ``NAME=DIR``; names go into URLs, so they are plain."""
    if "=" in spec and not Path(spec).exists():
        name, _, directory = spec.partition("=")
    else:
        directory = spec
        name = Path(spec.rstrip("/")).name
    if not _NAME.match(name):
        raise ConfigError(f"--model {spec}: model name {name!r} must be letters, digits, '.', '_' or '-' "
                          "(give one with NAME=DIR)")
    return name, Path(directory)


def _loader(kind: str) -> Callable[..., Any]:
    if kind == TAGGER:
        from textorch.tagging.labeler import SequenceLabeler

        return SequenceLabeler.load
    try:
        from textorch.classification.classifier import TextClassifier  # type: ignore[import-not-found]
    except ImportError:
        raise ConfigError("this textorch has no text classifier; cannot serve a classification model") from None
    return TextClassifier.load


def load_models(specs: list[str], device: torch.device | str = "cpu", cache_dir: str | None = None,
                engine: str = "torch", quantized: bool = False, threads: int | None = None,
                precision: str = "fp32") -> dict[str, ServedModel]:
    """Load every ``--model``; all are checked before the server binds its port.

    ``engine="onnx"`` runs each model with ONNX Runtime from ``DIR/onnx``, exported there first
    when absent or older than the model (into a temporary directory when ``DIR`` is read-only),
    as ``seq tag --engine onnx`` does: a served model answers exactly what the CLI would.
    ``engine="auto"`` (the ``serve`` default) does the same for models that may use it and runs
    there what is faster there (:func:`textorch.onnx.engine.attach_auto`).
    ``precision="bf16"`` runs the PyTorch networks under bfloat16 autocast (``--precision``).
    """
    from textorch.runtime.precision import check_inference_precision
    from textorch.onnx.engine import check_engine, use_engine

    check_engine(engine, device, quantized)
    check_inference_precision(precision, device, engine)
    models: dict[str, ServedModel] = {}
    for spec in specs:
        name, directory = parse_model_spec(spec)
        if name in models:
            raise ConfigError(f"--model {spec}: two models named {name!r}; name one with NAME=DIR")
        task = read_model_config(directory).get("task")
        kind = _TASK_KINDS.get(task)
        if kind is None:
            raise ModelFormatError(f"{directory}: cannot serve a model of task {task!r}")
        predictor = _loader(kind)(directory, device=device, cache_dir=cache_dir)
        predictor.precision = precision
        served_engine = use_engine(predictor, directory, engine, quantized, threads=threads)
        if kind == TAGGER:
            # A server lives long: loading the compiled CRF decoder now keeps Numba's load time
            # out of the first request (see textorch.models.cpu_decoder).
            predictor.preload_crf_decoder()
        models[name] = ServedModel(name, kind, predictor, str(directory), served_engine)
        logger.info("model %s: %s %s from %s, engine %s", name, kind, _architecture(predictor), directory, served_engine)
    return models
