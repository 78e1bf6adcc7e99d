"""textorch's benchmark suite: the peer comparison, feature benchmarks, the A/B of the fast paths,
diagnostics and parity checks, one folder per kind, each benchmark runnable from the repository
root as ``python -m benchmarks NAME [args]`` (or ``python -m benchmarks.KIND.NAME [args]``).

``SUITE`` is the one list of runnable benchmarks, grouped by kind, so that ``python -m benchmarks``
can show a newcomer what there is without importing any of them (several load torch, one needs
DeLFT's venv). Modules not in it are helpers the benchmarks share (``common``, ``suite_models``
and ``server_abuse`` here, ``stage_clocks`` in ``diagnostics``, ``bench_data``, ``bench_table``,
``f1_bootstrap``, ``runner_common`` and ``wapiti_peer`` in ``peers``) or runners that other
benchmarks start by path in a fresh process (``RUNNERS``).
"""

from __future__ import annotations

SUITE: dict[str, tuple[str, ...]] = {
    "setup": (
        "prepare",
    ),
    "peers": (
        "bench_vs_delft",
        "pooled_f1",
        "delft_env",
    ),
    "features": (
        "bench_seq_train",
        "bench_cls",
        "bench_bert",
        "bench_onnx",
        "bench_server",
        "soak_server",
        "bench_streaming",
        "bench_gpu",
        "bench_grobid_calls",
    ),
    "ab": (
        "fast_path_ab",
    ),
    "diagnostics": (
        "stages",
        "tagging_outputs",
        "int8_f1",
    ),
    "parity": (
        "bench_delft_import",
        "delft_onnx_parity",
        "verify_keras_import",
    ),
}
"""Runnable benchmarks by kind, one per line (a new benchmark is one added line): setup
(``prepare`` builds the saved models ``fast_path_ab`` times), peers (textorch against DeLFT and
Wapiti), features (one part of textorch measured alone), ab (each CPU fast path against its
general route), diagnostics (where a run's time goes, and what a change does to labels), parity
(labels or outputs compared with DeLFT's or Keras's)."""

RUNNERS: dict[str, str] = {"delft_runner": "peers", "textorch_runner": "peers", "wapiti_runner": "peers",
                           "delft_parity_runner": "parity"}
"""Runner -> its folder. Started by path (``python benchmarks/KIND/X_runner.py``) by the peer and
parity benchmarks, one fresh process per measure; ``delft_runner`` and ``delft_parity_runner`` run in DeLFT's venv,
where this package cannot be imported."""


def kind_of(name: str) -> str | None:
    """The kind of a runnable benchmark, None for a name that is not one."""
    return next((kind for kind, names in SUITE.items() if name in names), None)


def module_of(name: str) -> str:
    """The module of a runnable benchmark: ``benchmarks.KIND.NAME``, the set-up step at the top."""
    kind = kind_of(name)
    if kind is None:
        raise KeyError(name)
    return f"benchmarks.{name}" if kind == "setup" else f"benchmarks.{kind}.{name}"
