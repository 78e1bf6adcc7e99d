"""Where a model directory is read from: a textorch one as it is, a DeLFT one converted first.

GROBID's models directory may still hold models DeLFT trained. The conversion itself lives in
``textorch.tagging.delft.importer`` (``is_delft_model_dir``, ``convert_delft_model``), which a
textorch release may not have; this module is the one place that calls it. A DeLFT directory is
converted once into a cache folder keyed by its path and file dates, never written to, and the
converted copy is what is loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import uuid
from pathlib import Path

from textorch.errors import ModelFormatError

logger = logging.getLogger(__name__)

ENV_MODEL_CACHE = "TEXTORCH_DELFT_MODEL_CACHE"
IMPORTER = "textorch.tagging.delft.importer"


def model_cache_root() -> Path:
    """``$TEXTORCH_DELFT_MODEL_CACHE``, else ``~/.cache/textorch/delft-models``."""
    configured = os.environ.get(ENV_MODEL_CACHE)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "textorch" / "delft-models"


def is_textorch_model_dir(path: Path) -> bool:
    """A ``config.json`` that names a textorch task (DeLFT's has no ``task`` entry)."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(config, dict) and "task" in config


def _looks_like_delft(path: Path) -> bool:
    """DeLFT's files, for a clear message when the importer is missing."""
    names = {"preprocessor.json", "preprocessor.pkl", "model_weights.hdf5"}
    return path.is_dir() and any((path / name).is_file() for name in names)


def local_model_dir(directory: str | Path) -> Path:
    """The directory to load for ``directory``: itself, or the converted copy of a DeLFT model."""
    path = Path(directory)
    if is_textorch_model_dir(path) or not path.is_dir():
        return path
    if importlib.util.find_spec(IMPORTER) is None:
        if _looks_like_delft(path):
            raise ModelFormatError(f"{path}: a DeLFT model directory, and DeLFT model import not available in "
                                   "this textorch; retrain it with 'textorch grobid MODEL train'")
        return path
    importer = importlib.import_module(IMPORTER)
    if not importer.is_delft_model_dir(path):
        return path
    return _converted(path, importer.convert_delft_model)


def _fingerprint(path: Path) -> str:
    """The source's resolved path and the size and date of each file in it: a change converts again."""
    digest = hashlib.sha256(str(path.resolve()).encode())
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"\0{file.relative_to(path)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:24]


def _converted(source: Path, convert) -> Path:
    target = model_cache_root() / f"{source.name}-{_fingerprint(source)}"
    if is_textorch_model_dir(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}"
    logger.info("converting the DeLFT model %s into %s", source, target)
    written = Path(convert(source, temporary))
    try:
        os.replace(written, target)
    except OSError:  # another process converted it first: keep theirs
        if not is_textorch_model_dir(target):
            raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return target
