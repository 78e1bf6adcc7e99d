"""Embedding names as DeLFT resolves them, and the ``Embeddings`` class GROBID imports.

A DeLFT installation names its vectors in ``delft/resources-registry.json``
(``{"embeddings": [{"name": "glove-840B", "path": "/data/glove.840B.300d.txt", ...}]}``). A
bridge directory may hold that same file: its names are then looked up there first, so a
grobid.yaml written for DeLFT keeps working; other names go to textorch's own registry
(:mod:`textorch.embeddings.registry`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from textorch.errors import ConfigError

REGISTRY_FILE = "resources-registry.json"


def bridge_registry() -> Path | None:
    """``delft/resources-registry.json`` beside the imported ``delft`` package, if there is one."""
    module = sys.modules.get("delft")
    location = getattr(module, "__file__", None)
    if not location:
        return None
    path = Path(location).parent / REGISTRY_FILE
    return path if path.is_file() else None


def resolve_embeddings_name(name: str | None, registry: str | Path | None = None) -> str:
    """The textorch embeddings spec of a DeLFT embeddings name: a file path, a textorch name, or ``none``.

    ``registry`` is a DeLFT registry file (default: the bridge's). A name it lists must point
    at an existing file; a name it does not list is handed to textorch's registry as it is.
    """
    if not name:
        return "none"
    path = Path(registry) if registry is not None else bridge_registry()
    if path is None:
        return name
    try:
        entries = json.loads(path.read_text(encoding="utf-8")).get("embeddings") or []
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
        raise ConfigError(f"cannot read the DeLFT registry {path}: {exc}") from None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            file = entry.get("path")
            if not isinstance(file, str) or not Path(file).expanduser().is_file():
                raise ConfigError(f"embeddings {name!r} of the DeLFT registry {path}: file {file!r} not found "
                                  "(textorch reads local vector files only)")
            return str(Path(file).expanduser())
    return name


class Embeddings:
    """The word vectors of a DeLFT embeddings name, opened on first use.

    GROBID only imports this class; textorch models open their own vectors when loaded.
    DeLFT's ELMo and BERT contextual options are not offered.
    """

    def __init__(self, name: str, resource_registry: str | Path | dict | None = None, lang: str = "en",
                 extension: str = "vec", use_ELMo: bool = False, use_cache: bool = True, load: bool = True) -> None:
        if use_ELMo:
            raise ConfigError("Embeddings(use_ELMo=True): ELMo is not available in textorch")
        self.name = name
        self.lang = lang
        registry = resource_registry if isinstance(resource_registry, (str, Path)) else None
        self.spec = resolve_embeddings_name(name, registry)
        self.use_cache = use_cache
        self._vectors = None

    @classmethod
    def get_or_create(cls, name: str, resource_registry: str | Path | dict | None = None,
                      use_cache: bool = True, **_: object) -> Embeddings:
        return cls(name, resource_registry, use_cache=use_cache)

    @property
    def embed_size(self) -> int:
        """The vectors' dimension (opens them)."""
        if self._vectors is None:
            from textorch.embeddings import open_embeddings

            self._vectors = open_embeddings(self.spec)
        return int(self._vectors.dim)
