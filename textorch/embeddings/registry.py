"""Resolve an embeddings spec (a registry name or a file path) to a file on disk.

A registry lets configs and saved models say ``glove-840B`` instead of a machine-specific
path: each machine keeps its own JSON file mapping names to local paths::

    {"embeddings": [{"name": "glove-840B", "path": "/data/glove.840B.300d.txt",
                     "dim": 300, "lang": "en"}]}

Relative paths are taken from the registry file's folder, so a registry can travel with
the vectors it lists.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textorch.embeddings.delft_registry import bridge_registry, delft_registry_path, registry_entry
from textorch.errors import ConfigError

ENV_REGISTRY = "TEXTORCH_EMBEDDINGS_REGISTRY"


@dataclass(frozen=True)
class EmbeddingSource:
    """A resolved spec; ``dim`` is None when it came from a bare path (nothing to check)."""

    name: str
    path: Path
    dim: int | None = None
    lang: str | None = None


def default_registry_path() -> Path:
    return Path.home() / ".config" / "textorch" / "embeddings.json"


def registry_location(registry: str | Path | None = None) -> Path | None:
    """Explicit argument, else ``$TEXTORCH_EMBEDDINGS_REGISTRY``, else the default if present.

    An explicitly named registry that is missing is an error (a typo must not silently fall
    back to another registry); only the default location is optional.
    """
    if registry is not None:
        path, origin = Path(registry).expanduser(), "registry argument"
    elif os.environ.get(ENV_REGISTRY):
        path, origin = Path(os.environ[ENV_REGISTRY]).expanduser(), f"${ENV_REGISTRY}"
    else:
        default = default_registry_path()
        return default if default.is_file() else None
    if not path.is_file():
        raise ConfigError(f"embeddings registry {path} (from {origin}) does not exist")
    return path


def load_registry(path: Path) -> dict[str, EmbeddingSource]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read embeddings registry {path}: {exc}") from exc
    entries = data.get("embeddings") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ConfigError(f'embeddings registry {path}: expected {{"embeddings": [...]}}')
    sources: dict[str, EmbeddingSource] = {}
    for index, entry in enumerate(entries):
        source = _parse_entry(path, index, entry)
        if source.name in sources:
            raise ConfigError(f"embeddings registry {path}: name {source.name!r} listed twice")
        sources[source.name] = source
    return sources


def _parse_entry(registry: Path, index: int, entry: Any) -> EmbeddingSource:
    where = f"embeddings registry {registry}, entry {index}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected an object with name, path, dim")
    name, file, dim, lang = (entry.get(k) for k in ("name", "path", "dim", "lang"))
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}: 'name' must be a non-empty string")
    if not isinstance(file, str) or not file:
        raise ConfigError(f"{where} ({name}): 'path' must be a non-empty string")
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0):
        raise ConfigError(f"{where} ({name}): 'dim' must be a positive integer, got {dim!r}")
    resolved = Path(file).expanduser()
    if not resolved.is_absolute():
        resolved = registry.parent / resolved
    return EmbeddingSource(name, resolved, dim, lang if isinstance(lang, str) else None)


def resolve_spec(spec: str, registry: str | Path | None = None,
                 delft_registry: str | Path | None = None) -> EmbeddingSource:
    """The one rule for every path that names vectors (training, loading, DeLFT imports, the bridge).

    An existing file wins without reading any registry (a broken registry must not block
    explicit paths). A name is then looked up in DeLFT's registry (``delft_registry``, else the
    one of the textorch bridge this process runs in, see :mod:`.delft_registry`), then in
    textorch's (``registry``, else ``$TEXTORCH_EMBEDDINGS_REGISTRY``, else the default file).
    """
    as_path = Path(spec).expanduser()
    if as_path.is_file():
        return EmbeddingSource(as_path.name, as_path.resolve())
    delft = Path(delft_registry) if delft_registry is not None else bridge_registry()
    listed = delft_registry_path(spec, delft) if delft is not None else None
    if listed is not None:
        return EmbeddingSource(spec, listed.resolve())
    location = registry_location(registry)
    known = load_registry(location) if location is not None else {}
    if spec in known:
        source = known[spec]
        if not source.path.is_file():
            raise ConfigError(
                f"embeddings {spec!r} from registry {location}: file {source.path} not found"
            )
        return source
    if delft is not None:
        state = "which does not list it" if delft.is_file() else "no such file yet"
        raise ConfigError(
            f"embeddings {spec!r} are in no registry: add {registry_entry(spec)} to the \"embeddings\" list "
            f"of the DeLFT registry {delft} ({state}), or of textorch's registry {location or textorch_registry_file()}"
        )
    names = ", ".join(sorted(known)) or "none"
    where = f"registry {location}" if location is not None else "no registry found"
    raise ConfigError(
        f"unknown embeddings {spec!r}: not an existing file, and not a registered name "
        f"({where}; known names: {names}). Give a path to a vectors file, a registered name, "
        f"or 'none'; registries are set with ${ENV_REGISTRY} or "
        f"{default_registry_path()}"
    )


def textorch_registry_file() -> str:
    """Where textorch's registry is read, as a message names it."""
    if os.environ.get(ENV_REGISTRY):
        return f"{os.environ[ENV_REGISTRY]} (${ENV_REGISTRY})"
    return f"{default_registry_path()} (or set ${ENV_REGISTRY})"
