"""Embedding names as DeLFT resolves them, and the ``Embeddings`` class GROBID imports.

A DeLFT installation names its vectors in ``delft/resources-registry.json``
(``{"embeddings": [{"name": "glove-840B", "path": "/data/glove.840B.300d.txt", ...}]}``). A
bridge directory may hold that same file: its names are then looked up there first, so a
grobid.yaml written for DeLFT keeps working; other names go to textorch's own registry. The rule
is :func:`textorch.embeddings.registry.resolve_spec`'s, the same for training, loading and
DeLFT imports.
"""

from __future__ import annotations

from pathlib import Path

from textorch.embeddings.delft_registry import REGISTRY_FILE, bridge_registry, delft_registry_path
from textorch.errors import ConfigError

__all__ = ["REGISTRY_FILE", "Embeddings", "resolve_embeddings_name"]


def resolve_embeddings_name(name: str | None, registry: str | Path | None = None) -> str:
    """The textorch embeddings spec of a DeLFT embeddings name: a file path, a textorch name, or ``none``.

    ``registry`` is a DeLFT registry file (default: the bridge's). A name it lists must point
    at an existing file; a name it does not list is handed on as it is (to textorch's registry).
    """
    if not name:
        return "none"
    path = Path(registry) if registry is not None else bridge_registry()
    found = delft_registry_path(name, path) if path is not None else None
    return str(found) if found is not None else name


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
