"""The CPU fast paths of a tagging call, decided in one place, once per call.

A tagging call on the CPU may leave the reference route (a padded batch through ``nn.LSTM``'s
operator, the PyTorch CRF) at six points, each for speed alone, each giving the reference's
labels (and, but for the CRF kernel's float64 rounding, its scores). Before this module each
point decided for itself, from the tensors it saw; now :func:`decide` makes every choice from the
call's facts (device, model, engine) and what the caller allows (:attr:`SequenceLabeler.routes`),
and the modules that run the network read the one decision (:func:`current`) instead of deciding.

Why a context for the network's part and not an argument: the decision reaches the
labeler's own steps (one-sequence route, batch cuts) as an argument, but the network's layers are
``nn.Module`` calls whose signatures are shared with training, export and the classifier; the
labeler makes its decision current for the call (:func:`taking`) and the layers read it. Outside a
tagging call (training, a classifier, a direct model call) :data:`FAST` is current: every fast
path where its kernel serves the tensors, as before this module existed. Each kernel still
refuses tensors it cannot serve (gradients, another device or number format): the routes say
whether a fast path may be taken, never that a kernel must accept what it cannot run.

Every field earned at least 10 % on a row of the benchmark suite against its general route
(docs/performance.md, "Fast paths, each against its general route"); ``benchmarks/ab/fast_path_ab.py``
measures each by switching it off here.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from textorch.models.costs import INFERENCE_GROUP_COSTS, GroupCosts


@dataclass(frozen=True)
class CpuRoutes:
    """Which fast paths a call may take; False (or None) is the general route of each."""

    one_sequence: bool = True
    """A call of one sequence straight through the model's parts, no batch
    (:class:`textorch.models.one_sequence.OneSequenceTagger`); it needs ``laid_out_lstm``."""
    batch_groups: GroupCosts | None = INFERENCE_GROUP_COSTS
    """Batches cut into groups of similar length at these costs
    (:mod:`textorch.models.inference_batches`); None: length-sorted batches uncut."""
    laid_out_lstm: bool = True
    """LSTM directions on weights laid out once for oneDNN (:mod:`textorch.models.onednn_lstm`);
    False: ``torch.lstm``."""
    row_buckets: bool = True
    """Recurrent calls padded to a few row counts (:mod:`textorch.models.row_buckets`)."""
    char_length_groups: bool = True
    """The character BiLSTM's rows in length groups (:func:`textorch.models.padded_rnn.final_states`);
    False: one padded block."""
    crf_kernel: bool = True
    """CRF decoding by the CPU's one decoder (:func:`textorch.models.heads.cpu_crf_paths`: the
    compiled kernel); False: the PyTorch CRF's Viterbi and marginals."""

    def without(self, *names: str) -> "CpuRoutes":
        """These routes with the fast paths ``names`` (field names) switched off."""
        unknown = set(names) - {field.name for field in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"no such CPU route: {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **{name: None if name == "batch_groups" else False for name in names})


FAST = CpuRoutes()
"""Every fast path: a labeler's default, and what holds outside a tagging call."""

REFERENCE = FAST.without(*(field.name for field in dataclasses.fields(CpuRoutes)))
"""No fast path: the general route of each point (and every route on a GPU)."""


def decide(allowed: CpuRoutes, device: torch.device, has_transformer: bool,
           engine_group_costs: GroupCosts | None = None, torch_runs: bool = True) -> CpuRoutes:
    """The routes of one call: ``allowed`` (the caller's switches) where the call's facts let them.

    Off the CPU none (CUDA has its own routes, packed batches and the PyTorch CRF). Transformer
    models keep their batches uncut (their windows are grouped by the transformer embedder). A
    runner other than PyTorch (``torch_runs`` False: ONNX Runtime) takes no one-sequence route, and
    cuts batches at its own costs (``engine_group_costs``) where it has some."""
    if device.type != "cpu":
        return REFERENCE
    groups = allowed.batch_groups
    if groups is not None and (has_transformer or engine_group_costs is not None):
        groups = None if has_transformer else engine_group_costs
    one_sequence = allowed.one_sequence and allowed.laid_out_lstm and torch_runs
    if groups is allowed.batch_groups and one_sequence == allowed.one_sequence:
        return allowed  # the usual case, no new object: one-sequence calls are short
    return dataclasses.replace(allowed, batch_groups=groups, one_sequence=one_sequence)


_current: contextvars.ContextVar[CpuRoutes] = contextvars.ContextVar("textorch_cpu_routes", default=FAST)


def current() -> CpuRoutes:
    """The routes of the call in progress in this thread (:func:`taking`), else :data:`FAST`."""
    return _current.get()


@contextlib.contextmanager
def taking(routes: CpuRoutes) -> Iterator[CpuRoutes]:
    """Make ``routes`` current for the network's layers until the block ends (this thread or task only)."""
    token = _current.set(routes)
    try:
        yield routes
    finally:
        _current.reset(token)
