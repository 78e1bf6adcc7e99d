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
from textorch.onnx.opening import DEFAULT_ENGINE, EngineOptions

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
    Runtime where it is faster, see :mod:`textorch.onnx.opening`; ``pytorch`` when ``--engine
    auto`` found no ONNX model to use)."""

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


def _opener(kind: str) -> Callable[..., Any]:
    """The task's opener (:mod:`textorch.tagging.opening`, :mod:`textorch.classification.opening`):
    every served model gets its engine where every other door does."""
    if kind == TAGGER:
        from textorch.tagging.opening import open_tagger

        return open_tagger
    try:
        from textorch.classification.opening import open_classifier
    except ImportError:
        raise ConfigError("this textorch has no text classifier; cannot serve a classification model") from None
    return open_classifier


def load_models(specs: list[str], device: torch.device | str = "cpu", cache_dir: str | None = None,
                engine: str = DEFAULT_ENGINE, quantized: bool = False, threads: int | None = None,
                precision: str = "fp32") -> dict[str, ServedModel]:
    """Load every ``--model``; all are checked before the server binds its port.

    Each model is opened as every door opens it (:mod:`textorch.onnx.opening`): ``engine="auto"``
    (the default) runs with ONNX Runtime where it is faster, exported into ``DIR/onnx`` on first
    use; ``onnx`` runs every call there, ``torch`` none: a served model answers exactly what the
    CLI would. ``precision="bf16"`` runs the PyTorch networks under bfloat16 autocast
    (``--precision``).
    """
    options = EngineOptions(engine, device, precision, quantized, threads=threads)
    options.check()
    models: dict[str, ServedModel] = {}
    for spec in specs:
        name, directory = parse_model_spec(spec)
        if name in models:
            raise ConfigError(f"--model {spec}: two models named {name!r}; name one with NAME=DIR")
        task = read_model_config(directory).get("task")
        kind = _TASK_KINDS.get(task)
        if kind is None:
            raise ModelFormatError(f"{directory}: cannot serve a model of task {task!r}")
        opened = _opener(kind)(directory, options, cache_dir=cache_dir)
        predictor = opened.predictor
        if kind == TAGGER:
            # A server lives long: loading the compiled CRF decoder now keeps Numba's load time
            # out of the first request (see textorch.models.cpu_decoder).
            predictor.preload_crf_decoder()
        models[name] = ServedModel(name, kind, predictor, str(directory), opened.engine)
        logger.info("model %s: %s %s from %s, engine %s", name, kind, _architecture(predictor), directory, opened.engine)
    return models
