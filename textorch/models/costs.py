"""Every cost constant of textorch's routes, in one place.

Each figure here decides between two ways of computing the same result (one padded block or a
few groups, a shape oneDNN has seen or a new one, PyTorch or ONNX Runtime, fp32 or bfloat16);
none changes what a model learns or answers beyond rounding. Each was fitted, or checked, by
timing both sides: the numbers, their dates and the commands are in docs/performance.md, so
that a new machine's figures change this module and that page, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupCosts:
    """What running rows of different lengths in separate padded calls costs, in row-steps
    (one row for one time step): a call on ``n`` rows padded to ``T`` steps costs
    ``T * (n + step_cost_in_rows)``, and each group beyond the first ``group_cost`` more
    (:func:`textorch.models.length_groups.length_groups`)."""

    step_cost_in_rows: float
    group_cost: float
    max_groups: int


FINAL_STATE_GROUP_COSTS = GroupCosts(step_cost_in_rows=3.3, group_cost=600.0, max_groups=4)
"""Character BiLSTM over a batch's distinct tokens: padded character steps against a group's
calls and gathers (both directions)."""

TRAINING_GROUP_COSTS = GroupCosts(step_cost_in_rows=3.3, group_cost=60.0, max_groups=3)
"""A training batch's word RNN (forward and backward pass) cut into groups: padded word steps
against one more pair of recurrent calls. Random batches (``bucket_batches=1``) mix lengths
freely, so their word RNN would otherwise run most rows for the longest row's steps."""

INFERENCE_GROUP_COSTS = GroupCosts(step_cost_in_rows=3.3, group_cost=160.0, max_groups=8)
"""A CPU tagging batch cut in two: padded word steps against one more pass of every encoder call,
the dense layer and the CRF."""

ONNX_GROUP_COSTS = GroupCosts(step_cost_in_rows=3.3, group_cost=60.0, max_groups=8)
"""The same cut for ONNX Runtime, whose calls cost less than the PyTorch engine's: finer cuts."""

WINDOW_GROUP_COSTS = GroupCosts(step_cost_in_rows=0.5, group_cost=32.0, max_groups=4)
"""Transformer windows at inference: padded positions against one more encoder call."""

AUTO_ONNX_MAX_TOKENS = 1024
"""``--engine auto``: calls of at most this many tokens run in ONNX Runtime (cheaper per call),
larger ones in PyTorch (which encodes each distinct token's characters once per call)."""

AUTO_ONNX_MAX_LENGTH = 256
"""``--engine auto``: and whose longest sequence has at most this many tokens. On one long
sequence (a GROBID header, a bibliography) PyTorch's recurrent layers cost less per step than
the graph's: level at about this length on the header and reference-segmenter models."""

ONEDNN_ROW_BUCKETS_FROM = 16
"""Above this many rows a CPU recurrent call is padded to one of four row counts per doubling:
a little padding against a new oneDNN kernel for nearly every row count."""

BF16_MIN_ROWS = 8
"""Under ``--precision bf16``, batches of fewer sequences run in fp32: on them casts and kernel
set-up cost more than bfloat16 saves."""


def batch_precision(precision: str, rows: int) -> str:
    """The precision a batch (or a call) of ``rows`` sequences actually runs in (``BF16_MIN_ROWS``)."""
    return "fp32" if rows < BF16_MIN_ROWS else precision
