"""Writing an export directory: the graph, its int8 twin, and plain-JSON files, all at once.

Taggers and classifiers share this: the directory is written in a temporary sibling and renamed,
so a reader never sees half an export, and an existing directory is only ever replaced when it
is an earlier export (never a user's folder given by mistake as ``--output``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from textorch.errors import ConfigError
from textorch.model_dir import CONFIG_FILE
from textorch.runtime.file_modes import follow_umask
from textorch.runtime.write_errors import cannot_write
from textorch.onnx.exporter import write_graph
from textorch.onnx.layout import (  # noqa: F401 - this module's names since the first export
    DESCRIPTION_FILE,
    FORMAT_VERSION,
    GRAPH_REVISION,
    INT8_REVISION,
    ONNX_FILE,
    OPSET,
    QUANTIZED_FILE,
    TOKENIZER_FILE,
)

logger = logging.getLogger(__name__)


@dataclass
class Graph:
    """What ``torch.onnx.export`` needs: a module, named example inputs (in argument order), outputs."""

    module: nn.Module
    inputs: dict[str, torch.Tensor]
    outputs: list[str]
    dynamic_axes: dict[str, dict[int, str]]
    input_docs: dict[str, dict] = field(default_factory=dict)
    """Per input: dtype, shape (axis names) and where its values come from, for ``onnx-model.json``."""
    output_docs: dict[str, dict] = field(default_factory=dict)


def source_checksum(model_dir: str | Path | None) -> str | None:
    """SHA-256 of the weights of a saved model (from its ``config.json``), to recognise stale exports."""
    if model_dir is None:
        return None
    path = Path(model_dir) / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("weights_sha256")
    except (OSError, ValueError):
        return None


def describe(task: str, architecture: str, graph: Graph, quantize: bool, source_dir: str | Path | None) -> dict:
    """The fields every ``onnx-model.json`` has, whatever the task."""
    return {
        "format_version": FORMAT_VERSION,
        "graph_revision": GRAPH_REVISION,
        "task": task,
        "architecture": architecture,
        "model_file": ONNX_FILE,
        "quantized_model_file": QUANTIZED_FILE if quantize else None,
        "int8_revision": INT8_REVISION if quantize else None,
        "inputs": [{"name": name, **graph.input_docs.get(name, {})} for name in graph.inputs],
        "outputs": [{"name": name, **graph.output_docs.get(name, {})} for name in graph.outputs],
        "opset": OPSET,
        "source_weights_sha256": source_checksum(source_dir),
    }


def tokenizer_json(tokenizer: object, truncate_at: int | None = None) -> bytes:
    """The Hugging Face ``tokenizer.json`` of a fast tokenizer as textorch uses it, readable by the
    Rust ``tokenizers`` library and its Java/C++ bindings.

    It carries what the Python side sets per call, so another program needs no extra setting:
    the ``add_prefix_space`` a byte-level BPE needs for pre-split words (already in the loaded
    tokenizer), no padding, and truncation at ``truncate_at`` sub-tokens, special tokens
    included (classifiers), or none (taggers cut long sequences into windows instead).
    """
    from tokenizers import Tokenizer

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise ConfigError("ONNX export needs a fast tokenizer (tokenizer.json)")
    copy = Tokenizer.from_str(backend.to_str())
    copy.no_padding()
    if truncate_at:
        copy.enable_truncation(max_length=truncate_at)
    else:
        copy.no_truncation()
    return copy.to_str(pretty=True).encode("utf-8")


def check_output(output: Path) -> None:
    try:  # asking may fail: a name too long, a folder that cannot be read
        if output.exists() and not output.is_dir():
            raise ConfigError(f"{output}: exists and is not a directory; choose another --output")
        if output.exists() and any(output.iterdir()) and not (output / DESCRIPTION_FILE).exists():
            # Replacing the directory must never delete something that is not an earlier export.
            raise ConfigError(f"{output}: exists and is not an ONNX export; choose another --output")
    except OSError as exc:
        raise ExportWriteError(output, exc) from None


class ExportWriteError(ConfigError):
    """The export folder cannot be written (a full disk, a read-only place): one line naming it."""

    def __init__(self, output: Path, exc: OSError) -> None:
        super().__init__(cannot_write(output, exc, "cannot write the export"))
        self.errno = exc.errno


@contextmanager
def staged_directory(output: Path) -> Iterator[Path]:
    """A fresh folder beside ``output`` to write an export into; on success it replaces
    ``output`` in one rename (readers see the old export or the new one, never a mix), on any
    error it is removed and ``output`` is left as it was. A failed write (a full disk, a
    read-only place: an ``OSError``, the exporter's included) is an :class:`ExportWriteError`."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    except OSError as exc:
        raise ExportWriteError(output, exc) from None
    try:
        yield staging
        follow_umask(staging)  # mkdtemp's 0700 would hide the export from another account
        if output.exists():
            shutil.rmtree(output)
        os.replace(staging, output)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ExportWriteError(output, exc) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def write_export(output: str | Path, graph: Graph, json_files: dict[str, object], quantize: bool,
                 binary_files: dict[str, bytes] | None = None, extra_graphs: dict[str, Graph] | None = None,
                 quantized_extras: dict[str, str] | None = None) -> Path:
    """Export ``graph`` to ``output/model.onnx`` (and ``model.int8.onnx``), each of ``extra_graphs``
    to its file name, plus the given files, atomically. With ``quantize``, ``quantized_extras``
    maps an extra graph's file to the file of its int8 twin; the first of them (a tagger's
    network over character vectors) also decides what ``model.int8.onnx`` quantises, so that
    both int8 routes of a tagger compute alike (:func:`_quantize`'s ``like``)."""
    output = Path(output)
    check_output(output)
    with staged_directory(output) as staging:
        _export_graph(graph, staging / ONNX_FILE)
        for name, extra in (extra_graphs or {}).items():
            _export_graph(extra, staging / name)
        if quantize:
            for name, int8_name in (quantized_extras or {}).items():
                _quantize(staging / name, staging / int8_name)
            network = next(iter(quantized_extras or {}), None)
            _quantize(staging / ONNX_FILE, staging / QUANTIZED_FILE, like=staging / network if network else None)
        for name, content in json_files.items():
            (staging / name).write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        for name, data in (binary_files or {}).items():
            (staging / name).write_bytes(data)
    logger.info("ONNX export written to %s", output)
    return output


def _export_graph(graph: Graph, path: Path) -> None:
    write_graph(graph.module, graph.inputs, graph.outputs, graph.dynamic_axes, path, OPSET)


class _DropAdvice(logging.Filter):
    """Two root-logger warnings of onnxruntime's quantizer that say nothing wrong here: advice to
    pre-process the graph (optional), and that int64 tensors (elem_type 7: the pads and indices of
    convolutions and gathers) cannot be quantised, which they are not meant to be."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "pre-processing before quantization" in message:
            return False
        return not ("unsupported type to quantize" in message and "elem_type: 7" in message)


def _quantize(source: Path, target: Path, like: Path | None = None) -> None:
    """Dynamic int8 quantisation: weights stored as int8, activations quantised on the fly.

    ``reduce_range`` keeps weights to 7 bits. On x86 CPUs without VNNI, onnxruntime multiplies
    uint8 activations by int8 weights with an instruction whose 16-bit sums saturate, which
    garbles some outputs; 7-bit weights cannot saturate it, so one exported file is accurate on
    every CPU it may be served on, at a negligible cost in resolution. ``per_channel`` gives each
    output row of a weight matrix its own scale, which keeps the 7 bits' error far below one
    scale for the whole matrix.

    The quantiser only quantises weights held as initializers; the exporter writes a recurrent
    layer's (reordered) weights as constant nodes, so those are made initializers first
    (:func:`_constants_as_initializers`), else every LSTM would stay float.

    ``like``: only the nodes this graph also has are quantised, a node being known by its
    operator and the weights it reads (:func:`_node_keys`; names differ from one graph to the
    other, numbered by the exporter as it goes). A tagger's
    ``model.onnx`` then keeps its character encoder in float, as the split route runs it
    (``char-encoder.onnx`` in float, once per distinct token, then the int8 network)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    prepared = target.with_name(target.name + ".float")
    excluded = _prepared_for_quantizing(source, prepared, like)
    advice = _DropAdvice()
    root = logging.getLogger()
    root.addFilter(advice)
    try:
        quantize_dynamic(str(prepared), str(target), reduce_range=True, per_channel=True, weight_type=QuantType.QInt8,
                         nodes_to_exclude=excluded)
    finally:
        root.removeFilter(advice)
        prepared.unlink(missing_ok=True)


def _prepared_for_quantizing(source: Path, prepared: Path, like: Path | None) -> list[str] | None:
    """Write ``source`` with its constants as initializers to ``prepared``; returns the nodes to
    leave in float (see :func:`_quantize`'s ``like``). Its own function so that the graphs it
    loads are freed before the quantiser loads ``prepared`` again: with a large CRF feature
    table, two copies of the graph at once would set the peak memory of the whole training run."""
    import onnx

    model = onnx.load(str(source))
    _constants_as_initializers(model.graph)
    excluded = None
    if like is not None:
        other = onnx.load(str(like))
        _constants_as_initializers(other.graph)
        shared = set(_node_keys(other.graph).values())
        excluded = [name for name, key in _node_keys(model.graph).items() if key not in shared]
    onnx.save(model, str(prepared))
    return excluded


def _node_keys(graph: object) -> dict[str, tuple]:
    """Per node name, its operator and a digest of each weight (initializer) it reads: the same
    for the node that computes the same thing in another graph of the same model."""
    from onnx import numpy_helper

    digests = {}
    for tensor in graph.initializer:  # type: ignore[attr-defined]
        array = numpy_helper.to_array(tensor)
        digests[tensor.name] = hashlib.sha256(f"{array.dtype}{array.shape}".encode() + array.tobytes()).hexdigest()
    return {node.name: (node.op_type, tuple(digests[name] for name in node.input if name in digests))
            for node in graph.node}  # type: ignore[attr-defined]


def _constants_as_initializers(graph: object) -> None:
    """Each ``Constant`` node that holds a tensor becomes an initializer of the same name (the
    same graph, computed the same way; only where the values are kept changes)."""
    from onnx import numpy_helper

    kept = []
    for node in graph.node:  # type: ignore[attr-defined]
        if node.op_type == "Constant" and len(node.attribute) == 1 and node.attribute[0].name == "value":
            tensor = numpy_helper.to_array(node.attribute[0].t)
            graph.initializer.append(numpy_helper.from_array(tensor, node.output[0]))  # type: ignore[attr-defined]
        else:
            kept.append(node)
    del graph.node[:]  # type: ignore[attr-defined]
    graph.node.extend(kept)  # type: ignore[attr-defined]
