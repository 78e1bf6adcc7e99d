"""LMDB cache of a vectors file: built once by streaming the file, then opened as a memory map.

Parsing GloVe 840B takes minutes; every later open of the cache takes milliseconds and costs
no memory until vectors are read. The cache lives under a cache directory (never beside the
vectors file, whose folder is often read-only or shared) in a folder named after the file's
fingerprint and the cache layout version, so an edited file or a new layout gets a new cache.

Building is crash- and race-safe: each builder writes its own temporary folder in the cache
directory, syncs it, and renames it into place. ``rename`` of a folder is atomic and fails
when the target already exists, so a crash leaves only a temporary folder (swept a day later)
and, of two processes building the same cache, the loser deletes its copy and uses the
winner's, which holds the same data.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lmdb

from textorch.errors import ConfigError

if TYPE_CHECKING:  # the reader is passed in, not imported
    from textorch.embeddings.vector_files import FileFormat, VectorFileReader

logger = logging.getLogger(__name__)

CACHE_VERSION = 1
"""Bump when the stored layout or the parsing rules change, so old caches are not reused."""

ENV_CACHE_DIR = "TEXTORCH_CACHE_DIR"
EMBEDDINGS_FOLDER = "embeddings"

_VECTORS_DB = b"vectors"
_META_DB = b"meta"
_META_KEY = b"info"
_BATCH_RECORDS = 20_000
_MIN_MAP_SIZE = 64 << 20
_STALE_TEMP_SECONDS = 24 * 3600
_TEMP_PREFIX = ".tmp-"


def resolve_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """textorch's cache root: explicit argument, else ``$TEXTORCH_CACHE_DIR``, else ``~/.cache/textorch``.

    Everything textorch caches lives under it, one folder per kind: ``embeddings/`` (these
    vector caches) and ``delft-imports/`` (DeLFT models converted on load).
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    from_env = os.environ.get(ENV_CACHE_DIR)
    if from_env:
        return Path(from_env).expanduser()
    return Path.home() / ".cache" / "textorch"


def embeddings_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """Where vector caches are built: ``embeddings/`` under the cache root."""
    return resolve_cache_dir(cache_dir) / EMBEDDINGS_FOLDER


def cache_path(root: Path, fingerprint: str) -> Path:
    return root / f"{fingerprint}.v{CACHE_VERSION}"


def ensure_cache(
    source: Path,
    fmt: FileFormat,
    fingerprint: str,
    root: Path,
    open_reader: Callable[[], VectorFileReader],
) -> Path:
    """Return the cache folder for ``source``, building it first if no process has yet."""
    final = cache_path(root, fingerprint)
    if final.is_dir():
        return final
    try:
        root.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=f"{_TEMP_PREFIX}{fingerprint[:16]}-", dir=root))
    except OSError as exc:
        raise ConfigError(
            f"cannot create the embeddings cache in {root} ({exc}); "
            f"pass cache_dir or set {ENV_CACHE_DIR} to a writable folder"
        ) from exc
    _sweep_stale_temps(root)
    try:
        started = time.monotonic()
        _build(temp, source, fmt, fingerprint, open_reader)
        os.chmod(temp, 0o755)  # mkdtemp's 0o700 would hide a shared cache from other users
        if _publish(temp, final):
            logger.info("cached %s in %s (%.1f s)", source, final, time.monotonic() - started)
    finally:
        if temp.exists():
            shutil.rmtree(temp, ignore_errors=True)
    return final


def _publish(temp: Path, final: Path) -> bool:
    """Move a finished build into place; False when another process got there first."""
    try:
        os.rename(temp, final)
    except OSError:
        if final.is_dir():
            logger.info("another process built %s first; discarding this copy", final)
            return False
        raise
    return True


def _sweep_stale_temps(root: Path) -> None:
    """Remove leftovers of crashed builds; a day is far longer than any real build."""
    now = time.time()
    for entry in root.glob(f"{_TEMP_PREFIX}*"):
        try:
            data = entry / "data.mdb"
            mtime = (data if data.exists() else entry).stat().st_mtime
        except OSError:
            continue
        if now - mtime > _STALE_TEMP_SECONDS:
            shutil.rmtree(entry, ignore_errors=True)


def _initial_map_size(source: Path, fmt: FileFormat) -> int:
    """Guess generously: the map is address space, not disk; a full map grows anyway.

    Text stores ~10 characters per float against 4 bytes here, so the file size bounds the
    cache; binary adds B-tree overhead; gzip hides a ratio of up to ~4 for text.
    """
    factor = 2.0 if fmt.binary else 1.0
    if fmt.gzipped:
        factor *= 4.0
    return max(_MIN_MAP_SIZE, int(source.stat().st_size * factor) + (16 << 20))


@dataclass
class _BuildStats:
    stored: int = 0
    duplicates: int = 0
    unusable: int = 0


def _build(
    temp: Path,
    source: Path,
    fmt: FileFormat,
    fingerprint: str,
    open_reader: Callable[[], VectorFileReader],
) -> None:
    # sync=False: the single sync before the rename is what makes the result durable.
    env = lmdb.open(
        str(temp), map_size=_initial_map_size(source, fmt), max_dbs=2, sync=False, metasync=False
    )
    stats = _BuildStats()
    try:
        vectors = env.open_db(_VECTORS_DB)
        _stream_into(env, vectors, source, open_reader, stats)
        meta = {
            "version": CACHE_VERSION,
            "fingerprint": fingerprint,
            "dim": fmt.dim,
            "size": stats.stored,
            "source": str(source),
            "format": fmt.label,
        }
        with env.begin(write=True, db=env.open_db(_META_DB)) as txn:
            txn.put(_META_KEY, json.dumps(meta).encode("utf-8"))
        env.sync(True)
    finally:
        env.close()
    _report(source, fmt, stats)


def _stream_into(
    env: lmdb.Environment,
    db: Any,
    source: Path,
    open_reader: Callable[[], VectorFileReader],
    stats: _BuildStats,
) -> None:
    # Imported here, not at the top: every tagging process imports this module (the model's
    # embeddings are resolved through it), but only a cache build draws this bar.
    from tqdm import tqdm

    max_key = env.max_key_size()
    batch: list[tuple[bytes, bytes]] = []
    total = source.stat().st_size
    with open_reader() as reader, tqdm(
        total=total, unit="B", unit_scale=True, desc=f"caching {source.name}", file=sys.stderr
    ) as bar:
        for _line, word, vector in reader:
            if not word or len(word) > max_key:
                stats.unusable += 1
                continue
            batch.append((word, vector))
            if len(batch) >= _BATCH_RECORDS:
                _write_batch(env, db, batch, stats)
                batch.clear()
                bar.update(reader.position - bar.n)
        _write_batch(env, db, batch, stats)
        bar.update(total - bar.n)


def _write_batch(
    env: lmdb.Environment, db: Any, batch: list[tuple[bytes, bytes]], stats: _BuildStats
) -> None:
    """One write transaction per batch: every commit has a fixed cost (the write lock, fresh
    B-tree pages, a meta page), which per-record commits would pay for each of millions of words."""
    while True:
        try:
            with env.begin(write=True, db=db) as txn:
                added = sum(bool(txn.put(word, vec, overwrite=False)) for word, vec in batch)
        except lmdb.MapFullError:
            env.set_mapsize(env.info()["map_size"] * 2)
            continue
        stats.stored += added
        stats.duplicates += len(batch) - added
        return


def _report(source: Path, fmt: FileFormat, stats: _BuildStats) -> None:
    if stats.unusable:
        logger.warning(
            "%s: skipped %d empty or over-long (> 511 bytes) words", source, stats.unusable
        )
    if stats.duplicates:
        logger.warning("%s: %d repeated words; kept the first vector", source, stats.duplicates)
    seen = stats.stored + stats.duplicates + stats.unusable
    if fmt.header and not fmt.binary and fmt.count != seen:
        logger.warning("%s: header announces %s vectors, file has %d", source, fmt.count, seen)


# py-lmdb refuses to open one path twice in a process, and a program may train several models
# on the same vectors (n-fold runs, the Python API in a loop): stores of one path share one
# environment, closed when the last of them closes.
_SHARED_ENVS: dict[tuple[str, int], list] = {}


def _acquire_env(path: Path) -> "lmdb.Environment":
    key = (str(path.resolve()), os.getpid())
    entry = _SHARED_ENVS.get(key)
    if entry is None:
        env = lmdb.open(str(path), readonly=True, lock=False, readahead=False, max_dbs=2)
        entry = _SHARED_ENVS[key] = [env, 0]
    entry[1] += 1
    return entry[0]


def _release_env(path: Path, pid: int) -> None:
    key = (str(path.resolve()), pid)
    entry = _SHARED_ENVS.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _SHARED_ENVS[key]
        entry[0].close()


class VectorStore:
    """Read-only view of a built cache; every lookup batch is one read transaction.

    Opened with ``lock=False`` (the data never changes once renamed into place, and the cache
    folder may be read-only) and ``readahead=False`` (lookups are random; reading ahead would
    pull the whole multi-GB file into the page cache).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._open()
        self.meta = self._read_meta()

    def _open(self) -> None:
        try:
            self._env = _acquire_env(self.path)
            self._db = self._env.open_db(_VECTORS_DB, create=False)
            self._max_key = self._env.max_key_size()
        except lmdb.Error as exc:
            raise self._broken(str(exc)) from exc
        # LMDB handles must not cross fork() (DataLoader workers): reopen in a child.
        self._pid = os.getpid()

    def _broken(self, why: str) -> ConfigError:
        return ConfigError(
            f"embeddings cache {self.path} is unreadable ({why}); delete it to rebuild"
        )

    def _read_meta(self) -> dict[str, Any]:
        try:
            with self._env.begin(db=self._env.open_db(_META_DB, create=False)) as txn:
                raw = txn.get(_META_KEY)
        except lmdb.Error as exc:
            raise self._broken(str(exc)) from exc
        meta = json.loads(raw) if raw else None
        if not isinstance(meta, dict) or meta.get("version") != CACHE_VERSION:
            raise self._broken("missing or foreign metadata")
        return meta

    def get_first(self, candidates: list[tuple[bytes, ...]]) -> list[bytes | None]:
        """For each tuple of keys, the value of the first key present; all in one transaction."""
        if os.getpid() != self._pid:
            # A forked child (DataLoader worker) must not use its parent's handle; it opens its own.
            _SHARED_ENVS.pop((str(self.path.resolve()), self._pid), None)
            self._env.close()
            self._open()
        results: list[bytes | None] = []
        with self._env.begin(db=self._db) as txn:
            for keys in candidates:
                value = None
                for key in keys:
                    if 0 < len(key) <= self._max_key:
                        value = txn.get(key)
                        if value is not None:
                            break
                results.append(value)
        return results

    def close(self) -> None:
        _release_env(self.path, self._pid)
