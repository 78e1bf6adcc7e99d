"""Writing one ONNX graph: the one place that picks PyTorch's exporter for it.

PyTorch has deprecated its TorchScript-based exporter for the ``torch.export``-based one. Both
write textorch's graphs with the same results where the new one can write them at all (tested:
``tests/onnx/test_exporter.py``), but the new one takes over ten times as long per graph
(docs/performance.md, "ONNX export"), and an export now follows every training run and every
first use of a model. So the TorchScript exporter writes every graph while PyTorch has it
(:data:`EXPORTER_VARIABLE` asks for the new one); where it is gone, the new exporter takes
over by itself, for every graph it writes right (:mod:`textorch.onnx.legacy_export` lists the
layers it gets wrong, each with what goes wrong). This module gives the new exporter what
textorch's graphs need:

* the padded bidirectional RNNs of :mod:`textorch.models.export_layers` reach it as one
  ``textorch::native_birnn`` operator, written here as one native ``LSTM``/``GRU`` node with
  ``sequence_lens`` (:func:`_native_birnn`);
* the axes named in a graph's ``dynamic_axes`` stay dynamic and keep those names, so that a
  runner reading a graph's input shapes sees what it saw before;
* the graph is one file (the exporter would put the weights in a ``.data`` file beside it),
  unless it is over ONNX's 2 GB limit on one file, and at the opset asked for
  (:class:`OpsetNotKept` otherwise);
* the exporter's advice that says nothing wrong for these graphs is kept out of the log
  (:class:`_DropAdvice`).
"""

from __future__ import annotations

import inspect
import logging
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

from textorch.errors import ConfigError

from textorch.models import export_layers  # noqa: F401 - defines torch.ops.textorch.native_birnn
from textorch.onnx.legacy_export import legacy_reason, write_legacy_graph

logger = logging.getLogger(__name__)

_ADVICE_LOGGERS = (
    "torch.onnx._internal.exporter._compat",
    "torch.onnx._internal.exporter._registration",
    "onnxscript.version_converter",
)
"""Where the exporter logs what :class:`_DropAdvice` drops (a filter acts on its own logger only)."""


class _DropAdvice(logging.Filter):
    """The exporter's log lines that say nothing wrong about textorch's graphs: that it builds at
    its own opset and converts to the one asked for (every graph here is checked at that opset by
    ONNX Runtime in the tests), which converter does so, and that torchvision's operators are not
    registered (no graph here has any)."""

    _ADVICE = ("is a lower version than we have implementations for", "model version conversion",
               "torchvision is not installed")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(advice in message for advice in self._ADVICE)


@contextmanager
def _quiet_exporter() -> Iterator[None]:
    """The exporter's warnings and advice, which say nothing wrong about these graphs, kept out
    of the caller's warnings and log for the duration of one export (and no longer)."""
    advice = _DropAdvice()
    loggers = [logging.getLogger(name) for name in _ADVICE_LOGGERS]
    for named in loggers:
        named.addFilter(advice)
    try:
        with warnings.catch_warnings():
            # The exporter reports, as warnings: two axes that share one size in the example
            # inputs (the names are kept all the same), the tensors a recurrent layer holds as
            # attributes (constants of the graph, as meant), and its own use of functions
            # PyTorch is renaming.
            warnings.filterwarnings("ignore", category=UserWarning, message=r"# The axis name")
            warnings.filterwarnings("ignore", category=UserWarning, message=r"The tensor attributes")
            warnings.filterwarnings("ignore", category=FutureWarning)
            yield
    finally:
        for named in loggers:
            named.removeFilter(advice)


def _native_birnn(x, lengths, weights, recurrent, biases, kind: str, hidden: int, final: bool):  # noqa: ANN001, ANN201
    """``textorch::native_birnn`` as ONNX nodes: one bidirectional ``LSTM``/``GRU`` node reading
    the sequences steps first, each within its length (``sequence_lens``), then its outputs
    batch first: (B, T, 2H), or the final states (B, 2H), forward direction first."""
    from onnxscript import opset18 as op  # the exporter's own opset; the graph is converted after

    steps_first = op.Transpose(x, perm=[1, 0, 2])
    sequence_lens = op.Cast(lengths, to=6)  # int32, as the operator wants
    if kind == "LSTM":
        outputs, final_states, _ = op.LSTM(steps_first, weights, recurrent, biases, sequence_lens,
                                           hidden_size=hidden, direction="bidirectional")
    else:  # PyTorch's GRU formula applies the reset gate after the recurrent product
        outputs, final_states = op.GRU(steps_first, weights, recurrent, biases, sequence_lens,
                                       hidden_size=hidden, direction="bidirectional", linear_before_reset=1)
    if final:  # Y_h (2, B, H) -> (B, 2H)
        return op.Flatten(op.Transpose(final_states, perm=[1, 0, 2]), axis=1)
    by_batch = op.Transpose(outputs, perm=[2, 0, 1, 3])  # Y (T, 2, B, H) -> (B, T, 2, H)
    return op.Reshape(by_batch, op.Constant(value_ints=[0, 0, -1]))


def _dynamic_shapes(module: nn.Module, names: Sequence[str],
                    dynamic_axes: Mapping[str, Mapping[int, str]]) -> tuple[object, ...]:
    """Per input, in argument order, its dynamic axes by name (the exporter names them so),
    nested as ``torch.export`` binds the inputs to ``forward``: a ``forward(*inputs)`` gets
    them all as its one parameter."""
    per_input = tuple(dict(dynamic_axes.get(name, {})) for name in names)
    parameters = list(inspect.signature(module.forward).parameters.values())
    if parameters and parameters[0].kind is inspect.Parameter.VAR_POSITIONAL:
        return (per_input,)
    return per_input


class OpsetNotKept(RuntimeError):
    """The new exporter wrote a graph at another opset than the one asked for: its converter
    found no way there for one of the graph's operators (a layer to add to
    :data:`textorch.onnx.legacy_export.LEGACY_LAYERS`, with that reason)."""


EXPORTER_VARIABLE = "TEXTORCH_ONNX_EXPORTER"
"""``torch.export`` here makes the new exporter write every graph it writes right; unset (or
``torchscript``), the TorchScript exporter writes them while PyTorch has it."""


EXPORTERS = ("torchscript", "torch.export")


def write_graph(module: nn.Module, inputs: Mapping[str, torch.Tensor], output_names: Sequence[str],
                dynamic_axes: Mapping[str, Mapping[int, str]], path: Path, opset: int) -> None:
    """Export ``module`` run on ``inputs`` (by graph input name, in argument order) to ``path``:
    with the TorchScript exporter where the module holds a layer the new one gets wrong or the
    opset is older than it reaches (:func:`~textorch.onnx.legacy_export.legacy_reason`), and by
    default while PyTorch has it (the module docstring says why); else with the new one.

    The example inputs fix every axis that ``dynamic_axes`` does not name; with the new exporter
    the names of an output's axes come from the inputs they follow (the same names for every
    textorch graph)."""
    reason = legacy_reason(module, opset)
    if reason is not None:
        logger.debug("%s: the TorchScript exporter writes this graph (%s)", path.name, reason)
        write_legacy_graph(module, inputs, output_names, dynamic_axes, path, opset)
        return
    asked = os.environ.get(EXPORTER_VARIABLE, "torchscript")
    if asked not in EXPORTERS:
        raise ConfigError(f"{EXPORTER_VARIABLE}={asked!r}: use one of {', '.join(EXPORTERS)}")
    if asked != "torch.export":
        try:
            write_legacy_graph(module, inputs, output_names, dynamic_axes, path, opset)
            return
        except (ImportError, AttributeError, NotImplementedError, TypeError) as gone:
            # What a PyTorch without the TorchScript exporter raises for ``dynamo=False``.
            logger.info("%s: the TorchScript exporter is not available (%s: %s): the torch.export-based "
                        "exporter writes it", path.name, type(gone).__name__, gone)
    write_new_graph(module, inputs, output_names, dynamic_axes, path, opset)


def write_new_graph(module: nn.Module, inputs: Mapping[str, torch.Tensor], output_names: Sequence[str],
                    dynamic_axes: Mapping[str, Mapping[int, str]], path: Path, opset: int) -> None:
    """:func:`write_graph` with the ``torch.export``-based exporter, whatever the module holds;
    :class:`OpsetNotKept` where the graph it writes is at another opset than ``opset``."""
    names = list(inputs)
    with torch.no_grad(), _quiet_exporter():
        program = torch.onnx.export(
            module.eval(), tuple(inputs.values()), input_names=names, output_names=list(output_names),
            opset_version=opset, dynamo=True, verbose=False,
            dynamic_shapes=_dynamic_shapes(module, names, dynamic_axes),
            custom_translation_table={torch.ops.textorch.native_birnn.default: _native_birnn},
        )
    written = program.model.opset_imports.get("", None)
    if written != opset:
        raise OpsetNotKept(f"{path.name}: the exporter wrote opset {written}, not {opset}")
    program.save(str(path), external_data=None)
