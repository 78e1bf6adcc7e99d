"""The model directory: ``config.json``, ``vocab.json`` and ``model.safetensors``.

Written atomically: everything goes to a temporary sibling directory which is then renamed
over the target, so an interrupted save leaves either the old model or the new one, never a
mix. Weights are safetensors (no pickle); the config records a format version and the
SHA-256 of the weights file so truncation or tampering is reported, not loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

from textorch import __version__
from textorch.errors import ConfigError, ModelFormatError
from textorch.runtime.file_modes import follow_umask
from textorch.runtime.write_errors import save_safetensors

FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.json"
WEIGHTS_FILE = "model.safetensors"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_writable(target: str | Path) -> None:
    """Fail before a long training run, not after it, when the output cannot be written.

    Permission bits are not asked (``os.access``): root passes them everywhere, and a
    pseudo or read-only file system (``/proc``, a read-only mount) says yes and refuses
    the write. A probe directory is created and removed instead, in the nearest existing
    ancestor (where the model directory and its atomic-save sibling are made) and in
    ``target`` itself when it exists (where checkpoints go). Probe names are unique, so
    the processes of one run may probe at the same time.
    """
    try:
        if Path(target).exists() and not Path(target).is_dir():
            raise ModelFormatError(f"{target}: exists and is not a directory")
        probe_dir = Path(target).resolve().parent
        while not probe_dir.exists():
            probe_dir = probe_dir.parent
        if not probe_dir.is_dir():
            raise ModelFormatError(f"{target}: cannot write the model here ({probe_dir} is a file, not a directory)")
        for place in [probe_dir] + ([Path(target)] if Path(target).is_dir() else []):
            probe = place / f".textorch-probe-{uuid.uuid4().hex[:8]}"
            try:
                probe.mkdir()
            except OSError as exc:
                raise ModelFormatError(f"{target}: cannot write the model here (creating a directory in "
                                       f"{place} fails: {exc.strerror or exc})") from None
            probe.rmdir()
    except OSError as exc:  # a name too long, a loop of symbolic links...
        raise ModelFormatError(f"{target}: cannot write the model here ({exc.strerror or exc})") from None


def save_model_dir(
    target: str | Path,
    config: dict,
    vocab: dict,
    state_dict: dict[str, torch.Tensor],
    extra_files: dict[str, str | bytes] | None = None,
) -> Path:
    """Write a complete model directory at ``target``, replacing any previous one atomically.

    A failed write (disk full, a read-only or pseudo file system) is a :class:`ModelFormatError`
    naming ``target``: the user's to fix, so the CLI says it in one line rather than a traceback.
    """
    target = Path(target)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        tensors = {k: v.detach().to("cpu").contiguous() for k, v in state_dict.items()}
        save_safetensors(tensors, tmp / WEIGHTS_FILE)  # a full disk: the OSError, not a SafetensorError
        full_config = {
            "format_version": FORMAT_VERSION,
            "textorch_version": __version__,
            **config,
            "weights_sha256": _sha256(tmp / WEIGHTS_FILE),
        }
        (tmp / CONFIG_FILE).write_text(json.dumps(full_config, indent=2, sort_keys=False) + "\n", encoding="utf-8")
        (tmp / VOCAB_FILE).write_text(json.dumps(vocab, ensure_ascii=False) + "\n", encoding="utf-8")
        for name, content in (extra_files or {}).items():
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        follow_umask(tmp)  # safetensors writes 0600: another account could not load the model
        _fsync_dir(tmp)
        old = None
        if target.exists():
            old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(target, old)
        os.rename(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelFormatError(f"{target}: cannot write the model directory ({exc.strerror or exc})") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _fsync_dir(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())


def require_directory(directory: str | Path) -> Path:
    """``directory`` as a :class:`Path` when it is a folder; else a :class:`ModelFormatError` that
    says what it is instead (missing, a file: a ``--model`` given a data file, say)."""
    directory = Path(directory)
    if directory.is_dir():
        return directory
    if directory.is_file():
        why = "it is a file; give the model's folder"
    elif directory.exists():
        why = "it is not a folder"
    else:
        why = "it does not exist"
    raise ModelFormatError(f"{directory}: not a model directory ({why})")


def read_model_config(directory: str | Path) -> dict:
    """``config.json`` checked for presence, JSON validity and a supported format version."""
    directory = require_directory(directory)
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise ModelFormatError(f"{path}: missing; {directory} is not a textorch model directory")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ModelFormatError(f"{path}: not a JSON object; not a textorch model config")
    version = config.get("format_version")
    if not isinstance(version, int):
        raise ModelFormatError(f"{path}: no format_version; not a textorch model config")
    if version > FORMAT_VERSION:
        raise ModelFormatError(
            f"{path}: model format version {version} is newer than this textorch {__version__} "
            f"supports ({FORMAT_VERSION}); upgrade textorch"
        )
    return config


def load_model_dir(directory: str | Path, arrays: str = "torch") -> tuple[dict, dict, dict[str, Any]]:
    """Config, vocabularies and weights of a model directory, integrity-checked; the weights as
    torch tensors, or with ``arrays="numpy"`` as NumPy arrays (a reader that runs no PyTorch
    network need not import torch)."""
    directory = Path(directory)
    config = read_model_config(directory)
    vocab_path = directory / VOCAB_FILE
    try:
        vocab = json.loads(vocab_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFormatError(f"{vocab_path}: missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelFormatError(f"{vocab_path}: not valid JSON ({exc})") from None
    weights_path = directory / WEIGHTS_FILE
    if not weights_path.is_file():
        raise ModelFormatError(f"{weights_path}: missing")
    expected = config.get("weights_sha256")
    if expected and _sha256(weights_path) != expected:
        raise ModelFormatError(
            f"{weights_path}: checksum does not match config.json (file truncated or modified)"
        )
    if arrays == "numpy":
        from safetensors.numpy import load_file
    else:
        from safetensors.torch import load_file
    try:
        state_dict = load_file(str(weights_path))
    except Exception as exc:  # safetensors raises several types for corrupt files
        raise ModelFormatError(f"{weights_path}: cannot read weights ({exc})") from None
    return config, vocab, state_dict


@contextmanager
def read_from_config(directory: str | Path) -> Iterator[None]:
    """What the body reads of a saved ``config.json`` (its model and data sections, the network
    they name) is the file's: a :class:`ConfigError` it raises (an unknown architecture, a value
    out of range) becomes a :class:`ModelFormatError` naming ``DIR/config.json``."""
    try:
        yield
    except ConfigError as exc:
        raise ModelFormatError(f"{Path(directory) / CONFIG_FILE}: {exc}") from None


@dataclass
class SavedModel:
    """A model directory read and checked for one task: what both model kinds' ``load`` start from."""

    config: dict
    """``config.json``: its ``model`` and ``data`` sections give the configs back (``from_dict``)."""
    vocab: dict
    state: dict[str, Any]
    """torch tensors, or NumPy arrays (``load_checked(..., arrays=\"numpy\")``)."""
    builder: str
    """The builder that made the network, which the loading release knows."""


def load_checked(directory: str | Path, task: str, builders: Collection[str], default_builder: str = "",
                 arrays: str = "torch") -> SavedModel:
    """:func:`load_model_dir`, then the checks every ``load`` needs: a model of ``task`` (not
    the other kind) whose builder this release has (``default_builder`` for directories written
    before the builder was recorded). A failure is a :class:`ModelFormatError` naming the directory."""
    config, vocab, state = load_model_dir(directory, arrays)
    if config.get("task") != task:
        raise ModelFormatError(f"{directory}: a {config.get('task')!r} model, not a {task.replace('_', ' ')} model")
    builder = config.get("builder", default_builder)
    if builder not in builders:
        raise ModelFormatError(f"{directory}: unknown model builder {builder!r}; this textorch has: {', '.join(builders)}")
    return SavedModel(config, vocab, state, builder)


LABEL_WEIGHTS = ("head.crf.end_transitions", "head.emissions.bias", "head.emissions.2.bias")
"""The weights of a tagger whose first dimension is its label count: the CRF's, and the emission
layer's last bias (without, or with, a dense layer before it)."""


def check_labels_fit(directory: str | Path, n_labels: int, state: dict[str, Any],
                     weights: tuple[str, ...] = LABEL_WEIGHTS) -> None:
    """Refuse a model directory whose ``vocab.json`` names another number of labels than its
    weights give (an edited or swapped vocabulary): a network rebuilt from it would not load, and
    a runner that needs no network (ONNX Runtime) would write labels shifted or out of range.
    ``state``: torch tensors or NumPy arrays."""
    for name in weights:
        tensor = state.get(name)
        if tensor is None:
            continue
        size = int(tuple(tensor.shape)[0]) if len(tuple(tensor.shape)) else 0
        if size != n_labels:
            raise ModelFormatError(
                f"{Path(directory) / VOCAB_FILE}: {n_labels} labels, but {WEIGHTS_FILE} was trained for {size} "
                f"({name}); the vocabulary and the weights are not of one model")


def load_weights(network: torch.nn.Module, state: dict[str, torch.Tensor], directory: str | Path) -> None:
    """Saved weights into a network rebuilt from the config, in evaluation mode; a mismatch says so."""
    try:
        network.load_state_dict(state)
    except RuntimeError as exc:
        raise ModelFormatError(f"{directory}/{WEIGHTS_FILE}: weights do not fit the config ({exc})") from None
    network.eval()
