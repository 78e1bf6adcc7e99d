"""Word vectors as a model asks for them: by an ``--embeddings`` value when training, by the
description saved in its directory when loading.

Both model kinds (taggers and classifiers) open their vectors here, so ``none`` means the same
everywhere and a loaded model is always checked against the vectors it was trained with.
"""

from __future__ import annotations

from pathlib import Path

from textorch.embeddings.static import StaticEmbeddings, open_embeddings


def open_for_training(spec: str | None, cache_dir: str | Path | None) -> StaticEmbeddings | None:
    """The vectors an ``--embeddings`` value names; None for ``none`` (or nothing): no pre-trained vectors."""
    if spec in (None, "", "none"):
        return None
    return open_embeddings(spec, cache_dir=cache_dir)


def reopen_saved(described: dict | None, given: object | None, cache_dir: str | Path | None) -> object | None:
    """The vectors a saved model was trained with (``described``: its config's ``embeddings``).

    ``given`` (vectors the caller opened already, shared by several models) is used when there;
    otherwise they are re-opened from the saved path. Either way they are checked against the
    description, so a model never runs on vectors other than its own.
    """
    if described is None:
        return given
    embeddings = given if given is not None else open_embeddings(described["path"], cache_dir=cache_dir)
    embeddings.check_matches(described)  # type: ignore[union-attr]
    return embeddings
