"""Whether a model's int8 graph may be the one it runs by default: the rule and its record.

Dynamic int8 quantisation (``model.int8.onnx``) changes a network's outputs a little. On most
models it changes no label; on some it changes a few, and a few changed tokens can move
entity-level F1 by more than their share suggests (a changed token can break an entity in two).
So int8 is never assumed harmless: after training, :mod:`textorch.onnx.trained_export` runs the
float and the int8 graphs of the new export over the model's own data and records what they
gave in ``MODEL/onnx/int8-check.json``. :func:`int8_default_allowed` reads that record and
applies the rule below; the engines decide whether to ask it (docs/onnx.md, "int8 after training").

The rule, for taggers (units: tokens) and classifiers (units: texts) alike:

* at least :data:`MIN_AGREEMENT` of the units get the same label (a classifier's text: the
  same set of classes) from both graphs;
* the F1 of the two graphs against the gold labels (entity-level micro F1 for taggers, macro F1
  for classifiers) differs by at most :data:`MAX_F1_CHANGE` points, either way: a change that
  large means the graphs are not interchangeable, whichever is better;
* the data held at least :data:`MIN_UNITS` units: with fewer, full agreement does not show a
  disagreement rate under ``1 - MIN_AGREEMENT`` (with ``n`` units and none differing, the 95 %
  upper bound of the rate is about ``3 / n``: 0.5 % at 600).

The rule is applied when asked, to the recorded numbers, so a rule changed later also judges
checks written before it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from textorch.errors import ModelFormatError
from textorch.onnx.layout import QUANTIZED_FILE
from textorch.onnx.layout import read_description

CHECK_FILE = "int8-check.json"
CHECK_VERSION = 1
MIN_AGREEMENT = 0.995
"""Share of units (tokens, texts) that must get the same label from both graphs."""
MAX_F1_CHANGE = 0.1
"""Largest change of F1, in points (0-100), between the float and the int8 graph."""
MIN_UNITS = 600
"""Fewest units a check must hold to allow int8 (see the module's docstring)."""


@dataclass
class Int8Check:
    """What the float and the int8 graph of one export gave on the same data (``int8-check.json``)."""

    task: str
    unit: str
    """``tokens`` (taggers) or ``texts`` (classifiers): what ``units`` and ``agreement`` count."""
    sequences: int
    """Sequences (taggers) or texts (classifiers) checked."""
    units: int
    agreeing_units: int
    changed_sequences: int
    """Sequences or texts with at least one unit whose label differs."""
    f1_float: float
    """F1 in points (0-100) of the float graph against the gold labels of the data checked."""
    f1_int8: float
    data: dict
    """Where the data came from: ``{"validation": n, "training": n}`` sequences or texts."""
    source_weights_sha256: str | None
    """The weights the export was made from (its ``onnx-model.json``): a record of other weights is void."""
    int8_revision: int | None
    textorch_version: str
    seconds: float
    check_version: int = CHECK_VERSION
    thresholds: dict = field(default_factory=lambda: {"min_agreement": MIN_AGREEMENT, "max_f1_change": MAX_F1_CHANGE,
                                                      "min_units": MIN_UNITS})
    """The rule the verdict was given under (written for the reader; :func:`int8_default_allowed`
    applies the rule of the textorch that asks)."""
    verdict: str = ""
    """``int8 allowed`` or why not, under the rule of the textorch that wrote the check."""

    @property
    def agreement(self) -> float:
        return self.agreeing_units / self.units if self.units else 0.0

    @property
    def f1_change(self) -> float:
        return self.f1_int8 - self.f1_float

    def to_json(self) -> dict:
        return {**asdict(self), "agreement": self.agreement, "f1_change": self.f1_change}


def refusal(units: int, agreeing_units: int, f1_float: float, f1_int8: float) -> str | None:
    """Why the rule refuses int8 for these numbers, or None where it allows it."""
    if units < MIN_UNITS:
        return f"too little data: {units} units checked, the rule needs {MIN_UNITS}"
    agreement = agreeing_units / units
    if agreement < MIN_AGREEMENT:
        return f"{100 * agreement:.2f} % of units agree, the rule needs {100 * MIN_AGREEMENT:.1f} %"
    change = f1_int8 - f1_float
    if abs(change) > MAX_F1_CHANGE:
        return f"F1 changes by {change:+.2f} points, the rule allows {MAX_F1_CHANGE}"
    return None


def verdict_of(check: Int8Check) -> str:
    reason = refusal(check.units, check.agreeing_units, check.f1_float, check.f1_int8)
    return "int8 allowed" if reason is None else f"float only: {reason}"


def write_check(export_dir: str | Path, check: Int8Check) -> Path:
    """``export_dir/int8-check.json``, written beside the export and renamed into place (a reader
    sees the whole record or none); the export replaced later takes the record with it."""
    check.verdict = verdict_of(check)
    path = Path(export_dir) / CHECK_FILE
    staging = path.with_name(f".{CHECK_FILE}.{os.getpid()}")
    staging.write_text(json.dumps(check.to_json(), indent=1) + "\n", encoding="utf-8")
    os.replace(staging, path)
    return path


def read_check(export_dir: str | Path) -> dict | None:
    """The record of ``export_dir``; None where there is none or it cannot be read."""
    path = Path(export_dir) / CHECK_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def int8_default_allowed(export_dir: str | Path) -> bool:
    """Whether ``model.int8.onnx`` of ``export_dir`` may run by default in place of ``model.onnx``.

    True only when the directory holds an int8 model and a check of this very export (the same
    weights, the same ``int8_revision``) whose numbers the rule of the module's docstring allows.
    An export made by ``textorch export onnx`` (no check) or again by an engine (a new directory,
    the check gone) gives False: the float model is the safe default, never the other way round.
    """
    directory = Path(export_dir)
    try:
        description = read_description(directory)
    except ModelFormatError:
        return False
    record = read_check(directory)
    if description is None or record is None or not (directory / QUANTIZED_FILE).is_file():
        return False
    if record.get("check_version") != CHECK_VERSION:
        return False
    if record.get("source_weights_sha256") != description.get("source_weights_sha256"):
        return False
    if record.get("int8_revision") != description.get("int8_revision"):
        return False
    try:
        return refusal(int(record["units"]), int(record["agreeing_units"]), float(record["f1_float"]),
                       float(record["f1_int8"])) is None
    except (KeyError, TypeError, ValueError):
        return False
