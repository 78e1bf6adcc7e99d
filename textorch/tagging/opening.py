"""A saved tagger, opened as the user's engine options ask: every door's one way in.

The choice of engine is :mod:`textorch.onnx.opening`'s; this module gives it the tagging task's
two ways of opening a model directory: :meth:`SequenceLabeler.load` in PyTorch, and, for a
caller that only predicts (``seq tag``, ``grobid MODEL tag``), the torch-free
:class:`~textorch.tagging.onnx_tagger.OnnxTagger`. It imports no torch itself (the labeler is
imported when a model is loaded in PyTorch), so that the torch-free route stays free of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textorch.onnx.opening import EngineOptions, Opened, open_predictor, open_without_torch
from textorch.tagging.onnx_tagger import OnnxTagger

if TYPE_CHECKING:
    from textorch.tagging.labeler import SequenceLabeler


def open_tagger(directory: str | Path, options: EngineOptions | None = None, *, cache_dir: str | Path | None = None,
                embeddings: object | None = None, predict_only: bool = False) -> Opened:
    """The tagger of ``directory`` (a textorch or a DeLFT model) and what runs it.

    ``options`` default to :class:`EngineOptions`' (``auto`` on the CPU). ``predict_only``: the
    caller needs ``predict`` alone (what :class:`OnnxTagger` has), so the torch-free tagger may
    answer; otherwise the predictor is a :class:`SequenceLabeler` (evaluation, training, the
    server's and the facade's uses).
    """

    def load(path: str | Path, device: Any) -> SequenceLabeler:
        from textorch.tagging.labeler import SequenceLabeler  # imports torch: only on this route

        return SequenceLabeler.load(path, device=device, embeddings=embeddings, cache_dir=cache_dir, engine="torch")

    directory = textorch_dir(directory, cache_dir, embeddings)
    return open_predictor(directory, options or EngineOptions(), load, _torch_free(cache_dir) if predict_only else None)


def torch_free_tagger(directory: str | Path, options: EngineOptions, cache_dir: str | Path | None = None) -> OnnxTagger | None:
    """The torch-free tagger of ``directory`` where :mod:`textorch.onnx.opening` takes it for
    ``options``, else None (a command then opens the tagger with :func:`open_tagger` inside its
    PyTorch session)."""
    return open_without_torch(textorch_dir(directory, cache_dir), options, _torch_free(cache_dir))


def textorch_dir(directory: str | Path, cache_dir: str | Path | None = None, embeddings: object | None = None) -> Path:
    """``directory``, or for a model DeLFT saved its conversion in the cache (made once,
    :func:`~textorch.tagging.delft_import.importer.converted_dir`): what every engine reads, and
    where its export goes, so that a DeLFT directory is never written to."""
    path = Path(directory)
    if _names_a_task(path):  # a textorch directory, told without importing the importer (and torch)
        return path
    from textorch.tagging.delft_import.importer import converted_dir, is_delft_model_dir

    return converted_dir(path, cache_dir, embeddings) if is_delft_model_dir(path) else path


def _torch_free(cache_dir: str | Path | None):
    def opened(path: str | Path, chosen: EngineOptions) -> OnnxTagger:
        return OnnxTagger.open(path, chosen.onnx_dir, chosen.int8, cache_dir, chosen.threads)

    return opened


def _names_a_task(directory: Path) -> bool:
    """Whether ``directory``'s ``config.json`` names a task, as textorch's do and DeLFT's never."""
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(config, dict) and "task" in config
