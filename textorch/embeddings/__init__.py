"""Pre-trained static word embeddings (GloVe, word2vec, fastText) behind an LMDB cache."""

from textorch.embeddings.cache import ENV_CACHE_DIR, resolve_cache_dir
from textorch.embeddings.registry import (
    ENV_REGISTRY,
    EmbeddingSource,
    load_registry,
    registry_location,
    resolve_spec,
)
from textorch.embeddings.static import StaticEmbeddings, open_embeddings
from textorch.embeddings.vector_files import FileFormat, VectorFileReader, fingerprint_file, sniff_format

__all__ = [
    "ENV_CACHE_DIR",
    "ENV_REGISTRY",
    "EmbeddingSource",
    "FileFormat",
    "StaticEmbeddings",
    "VectorFileReader",
    "fingerprint_file",
    "load_registry",
    "open_embeddings",
    "registry_location",
    "resolve_cache_dir",
    "resolve_spec",
    "sniff_format",
]
