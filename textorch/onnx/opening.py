"""Which engine runs a saved model: the one place that decides, for every door.

The CLI (``seq tag|eval``, ``grobid MODEL tag|eval``, ``ner eval``, ``cls classify|eval``), the
server, ``SequenceLabeler.load`` / ``TextClassifier.load`` and the DeLFT facade give a model
directory and the user's :class:`EngineOptions` to their task's opener
(:func:`textorch.tagging.opening.open_tagger`, :func:`textorch.classification.opening.open_classifier`),
which hands them here with its task's two ways of opening a model: loading it in PyTorch, and (a
tagger asked only to predict) the torch-free ONNX Runtime tagger. What comes back tags or
classifies; nothing else chooses an engine.

The route, decided once per model::

    options ─ check ─┬─ torch-free tagger? (predict only, onnx|auto, fp32, CPU, one process,
                     │   a current export)            ── yes ─> OnnxTagger (no torch imported)
                     └─ load in PyTorch, then by engine:
                          torch ─> PyTorch
                          onnx  ─> ONNX Runtime for every call (exported first where needed)
                          auto  ─> no transformer, CPU, fp32, onnxruntime, an export made or
                                   found?  yes: AutoRunner (a tagger's small calls in ONNX
                                   Runtime, the rest in PyTorch; a classifier's every call in
                                   ONNX Runtime)   no: PyTorch, with the reason logged

``auto`` is the default everywhere: the fastest path whose labels are the model's (the two
engines agree within 1e-4, tested). The per-call choice of ``auto`` lives in what this returns
(:class:`textorch.onnx.engine.AutoRunner`), not in the callers.

This module imports no torch: ``seq tag`` on a model with a current export runs without it. The
PyTorch side (:mod:`textorch.onnx.engine`, :mod:`textorch.runtime.precision`) is imported when a
model is loaded in PyTorch.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from textorch.errors import ConfigError
from textorch.onnx.int8_rule import CHECK_FILE, int8_default_allowed
from textorch.train.dist import DistContext, context_from_env, resolve_device

logger = logging.getLogger(__name__)

ENGINES = ("torch", "onnx", "auto")
DEFAULT_ENGINE = "auto"
"""What runs a saved model when nobody says: ONNX Runtime where it is faster, else PyTorch."""


class NotServed(Exception):
    """The torch-free tagger cannot run the model as asked; the reason says why (the model is then
    loaded in PyTorch, which exports first where needed)."""


@dataclass(frozen=True)
class EngineOptions:
    """What the user asked of the engine (the commands' ``--engine``, ``--device``, ``--precision``,
    ``--quantized``, ``--onnx-dir``, ``--threads``)."""

    engine: str = DEFAULT_ENGINE
    device: Any = "cpu"
    """``cpu``, ``cuda``, ``auto`` (a GPU when one is visible) or a ``torch.device``."""
    precision: str = "fp32"
    quantized: bool = False
    onnx_dir: str | Path | None = None
    threads: int | None = None
    checked_int8: bool = False
    """Set by this module, never by a user: ``auto`` runs the export's int8 model, which training
    checked against the float one (:func:`with_checked_int8`)."""

    @property
    def int8(self) -> bool:
        """Whether the int8 model runs: asked (``--quantized``) or checked at training."""
        return self.quantized or self.checked_int8

    def check(self) -> None:
        """Refuse options that do not go together, before any model is read (ONNX Runtime runs on the CPU here)."""
        if self.engine not in ENGINES:
            raise ConfigError(f"--engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.engine != "onnx" and (self.quantized or self.onnx_dir):
            raise ConfigError("--quantized and --onnx-dir need --engine onnx")
        if self.engine == "onnx" and _device_type(self.device) not in ("cpu", "auto"):
            raise ConfigError("--engine onnx runs on the CPU; use --device cpu")
        if self.engine == "onnx" and self.precision != "fp32":
            raise ConfigError(f"--precision {self.precision} needs --engine torch (ONNX Runtime runs the exported fp32 "
                              "or int8 graph; see --quantized)")

    def session_device(self) -> str:
        """The ``--device`` a PyTorch session resolves: the CPU for ``onnx`` where the user left
        ``auto`` (ONNX Runtime runs on the CPU: ``auto`` must not pick a GPU for it)."""
        device = str(self.device)
        return "cpu" if self.engine == "onnx" and device == "auto" else device


@dataclass
class Opened:
    """A model ready to tag or classify, and what runs it: ``pytorch``, ``onnx`` or ``auto``."""

    predictor: Any
    engine: str


Loader = Callable[[Any, Any], Any]
"""``load(directory, device)``: a task's model loaded in PyTorch, no engine attached."""
TorchFreeOpener = Callable[[Any, EngineOptions], Any]
"""``open(directory, options)``: the torch-free tagger, or :class:`NotServed`."""


def open_predictor(directory: str | Path, options: EngineOptions, load: Loader,
                   open_torch_free: TorchFreeOpener | None = None) -> Opened:
    """The model of ``directory`` run as ``options`` ask (see the module docstring): the torch-free
    tagger where the caller gives one and it serves, else ``load`` then :func:`run_loaded`."""
    options.check()
    options = with_checked_int8(directory, options)
    if open_torch_free is not None:
        tagger = open_without_torch(directory, options, open_torch_free)
        if tagger is not None:
            return Opened(tagger, "onnx" if options.engine == "onnx" else "auto")
    device = options.session_device()
    predictor = load(directory, resolve_device(device, DistContext()) if device == "auto" else options.device)
    return Opened(predictor, run_loaded(predictor, directory, options))


def with_checked_int8(directory: str | Path, options: EngineOptions) -> EngineOptions:
    """``options`` with the int8 model as the default of ``auto`` where training checked it against
    the float model on the model's own data and the rule allowed it
    (:func:`textorch.onnx.int8_rule.int8_default_allowed`, docs/onnx.md); unchanged otherwise
    (another engine, an ``--onnx-dir`` or ``--quantized`` of the user's, no check, a failed one)."""
    if options.engine != "auto" or options.int8 or options.onnx_dir is not None:
        return options
    if not int8_default_allowed(Path(directory) / "onnx"):  # the engines' own export directory, MODEL/onnx
        return options
    logger.info("%s: its int8 model runs (checked against the float one at training, %s)", directory,
                Path(directory) / "onnx" / CHECK_FILE)
    return replace(options, checked_int8=True)


def torch_free_blocker(options: EngineOptions) -> str | None:
    """Why the torch-free tagger may not run with ``options`` (None: it may, if the export serves).

    It runs ``onnx`` and ``auto`` alike: on a current export it is faster than PyTorch on every
    whole file measured, and it saves importing torch (a second or more)."""
    if options.engine not in ("onnx", "auto"):
        return f"--engine {options.engine}"
    if options.precision != "fp32":
        return f"--precision {options.precision} runs in PyTorch"
    device = _device_type(options.device)
    if device not in ("cpu", "auto"):
        return f"--device {options.device}"
    if device == "auto" and gpu_visible():
        return "a GPU is visible: --device auto takes it, through PyTorch"
    if options.engine == "auto" and (options.quantized or options.onnx_dir):
        return "--quantized and --onnx-dir need --engine onnx"  # refused on the PyTorch path, by check()
    if context_from_env().world_size > 1:
        return "several processes share the work"
    return None


def open_without_torch(directory: str | Path, options: EngineOptions, open_torch_free: TorchFreeOpener) -> Any | None:
    """The torch-free tagger of ``directory``, or None where it may not or cannot run (logged:
    the caller then loads the model in PyTorch, which exports first where needed)."""
    options.check()
    options = with_checked_int8(directory, options)
    reason = torch_free_blocker(options)
    if reason is not None:
        logger.debug("%s: loading it with PyTorch (%s)", directory, reason)
        return None
    try:
        tagger = open_torch_free(directory, options)
    except NotServed as why:
        logger.info("%s: loading it with PyTorch (%s)", directory, why)
        return None
    logger.info("%s runs with ONNX Runtime from its export, without PyTorch", directory)
    return tagger


def run_loaded(predictor: Any, directory: str | Path, options: EngineOptions) -> str:
    """Make ``predictor`` (a tagger or a classifier loaded from ``directory`` in PyTorch) run as
    ``options`` ask; returns what runs it: ``pytorch``, ``onnx`` or ``auto`` (``pytorch`` when
    ``auto`` found no ONNX model to use)."""
    # Imported here: they import torch, which the torch-free route never loads.
    from textorch.onnx import engine
    from textorch.runtime.precision import check_inference_precision

    options = replace(options, device=predictor.device)
    options.check()
    check_inference_precision(options.precision, predictor.device, options.engine)
    predictor.precision = options.precision
    predictor.runner = None
    if options.engine == "onnx":
        export = engine.attach_onnx(predictor, directory, options.onnx_dir, options.quantized, options.threads)
        logger.info("%s runs with ONNX Runtime from %s%s", directory, export, " (int8)" if options.quantized else "")
        return "onnx"
    if options.engine == "auto" and _attach_auto(predictor, directory, options.threads, options.checked_int8):
        return "auto"
    return "pytorch"


def onnx_model_blocker(predictor: Any) -> str | None:
    """Why ``predictor``'s network is not one ONNX Runtime runs here, or None: a transformer (whose
    export is large and slow to make) stays in PyTorch, and onnxruntime and onnx must be installed.
    The rule of ``auto`` below and of the export written after training
    (:func:`textorch.onnx.trained_export.export_after_training`); looked up, not imported."""
    classifier = predictor.task == "text_classification"
    if (predictor.transformer_parts if classifier else predictor.transformer) is not None:
        return "a transformer model runs in PyTorch under --engine auto"
    missing = [name for name in ("onnxruntime", "onnx") if importlib.util.find_spec(name) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (pip install 'textorch[onnx]')"
    return None


def auto_engine_blocker(predictor: Any) -> str | None:
    """Why ``auto`` runs everything in PyTorch for ``predictor``, or None when it may use ONNX
    Runtime: :func:`onnx_model_blocker`'s rule, on the CPU, with ``precision`` fp32."""
    reason = onnx_model_blocker(predictor)
    if reason is not None:
        return reason
    if predictor.device.type != "cpu":
        return f"the model runs on {predictor.device}"
    if predictor.precision != "fp32":
        return f"--precision {predictor.precision} runs in PyTorch"
    return None


def _attach_auto(predictor: Any, directory: str | Path, threads: int | None, int8: bool = False) -> bool:
    """``auto`` on a loaded model: a tagger runs its small calls with ONNX Runtime
    (:class:`~textorch.onnx.engine.AutoRunner`), a classifier all of them, exported as ``onnx``
    does. False when every call stays in PyTorch (the reason is logged: an export that fails must
    not stop a model that runs fine in PyTorch)."""
    from textorch.onnx import engine

    reason = auto_engine_blocker(predictor)
    if reason is not None:
        logger.info("--engine auto: %s runs every call in PyTorch: %s", directory, reason)
        return False
    try:
        engine.attach_onnx(predictor, directory, quantized=int8, threads=threads)
    except Exception as exc:  # noqa: BLE001 - any export or runtime failure: PyTorch it is
        predictor.runner = None
        logger.warning("--engine auto: %s runs every call in PyTorch: no ONNX model (%s: %s)",
                       directory, type(exc).__name__, exc)
        return False
    # A classifier keeps ONNX Runtime for every call: it was faster at every call size measured,
    # GRU and CNN alike (PyTorch's CPU GRU runs step by step, without oneDNN; see
    # docs/performance.md).
    if predictor.task != "text_classification":
        predictor.runner = engine.AutoRunner(predictor.runner)
    return True


def gpu_visible() -> bool:
    """Whether this process may see a GPU, judged without importing torch (a second of start-up):
    ``CUDA_VISIBLE_DEVICES`` empty or -1 hides them; otherwise an NVIDIA driver's GPU list or
    ROCm's device node says there is one."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    nvidia = Path("/proc/driver/nvidia/gpus")
    return (nvidia.is_dir() and any(nvidia.iterdir())) or Path("/dev/kfd").exists()


def _device_type(device: Any) -> str:
    """``cpu``, ``cuda``, ``auto``... of a device name or a ``torch.device``, without torch."""
    return getattr(device, "type", None) or str(device).split(":")[0]
