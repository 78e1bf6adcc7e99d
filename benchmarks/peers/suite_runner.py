"""How the peer suite starts the processes it measures: one fresh runner process per measure.

Every measure of ``bench_vs_delft`` (training, tagging, loading, whole files) is taken by a
fresh process of a twin runner (``delft_runner.py``, ``textorch_runner.py``, ``wapiti_runner.py``)
or of textorch's own command line, all started here: one place decides the command of each
system, the environment every process shares (glibc's allocator settings, the same for all
systems) and how a process's ``BENCH_JSON`` line, log and failure are kept. The training and
tagging modules take a :class:`Runner` as an argument, so that their tests can hand them a
fake one that records what would have been started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.peers import wapiti_runner
from benchmarks.peers.runner_common import ALLOCATOR_VARIABLES

PEERS_DIR = Path(__file__).resolve().parent
"""The folder of the runner scripts, which are started by path (the DeLFT one in DeLFT's venv,
where this package cannot be imported)."""


def allocator_env() -> dict[str, str]:
    """glibc's allocator settings for every tagging process of both systems, as environment variables.

    textorch's command line sets glibc's mmap and trim thresholds with ``mallopt`` when asked
    (``--tune-allocator``, :mod:`textorch.runtime.malloc_tuning`); DeLFT leaves them at glibc's defaults. Set in
    one system's processes only, they would time the allocator with the library. Any
    program can choose them (they are process settings, not library code), so both systems
    run under textorch's values, given through glibc's own variables: textorch's
    ``keep_freed_memory`` then leaves them as they are, and DeLFT's processes get the same.
    """
    from textorch.runtime.malloc_tuning import MMAP_THRESHOLD, TRIM_THRESHOLD

    return dict(zip(ALLOCATOR_VARIABLES, (str(MMAP_THRESHOLD), str(TRIM_THRESHOLD))))


class Runner:
    """Starts runner processes, reads their ``BENCH_JSON`` line, keeps logs and failures."""

    def __init__(self, work: Path, delft_python: Path | None, threads: int | None = None,
                 wapiti: str | None = None, textorch_entry: list[str] | None = None, textorch_engine: str = "default") -> None:
        self.work = work
        self.wapiti = wapiti
        self.env = {**os.environ, **allocator_env()}
        self.threads = ["--threads", str(threads)] if threads else []
        self.delft_python = delft_python
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.failures: list[str] = []
        self.cache = work / "textorch-cache"
        self.textorch_entry = textorch_entry or []
        """Options of the ``textorch`` entry point itself for whole-file tagging (``--pause-collector``)."""
        self.textorch_engine = textorch_engine
        """Whole-file tagging's engine: ``default`` (no engine option: what a user types after
        training), ``torch``, ``onnx`` or ``onnx-int8`` (``seq tag --engine onnx --quantized``); all but
        ``torch`` export the model first (untimed, as training does)."""
        self.wapiti_time_limit: float | None = None
        """Seconds before each Wapiti training is stopped (``--wapiti-time-limit``)."""
        self.wapiti_iterations: int | None = None
        """Wapiti's ``-i`` in place of GROBID's 2000 (``--wapiti-iterations``)."""

    def engine_options(self) -> list[str]:
        """``seq tag``'s options for :attr:`textorch_engine`."""
        if self.textorch_engine == "default":
            return []
        if self.textorch_engine == "onnx-int8":
            return ["--engine", "onnx", "--quantized"]
        return ["--engine", self.textorch_engine]

    def export_options(self) -> list[str] | None:
        """``export onnx``'s options that make what :attr:`textorch_engine` runs; None: no export."""
        if self.textorch_engine == "torch":
            return None
        return ["--quantize"] if self.textorch_engine == "onnx-int8" else []

    def command(self, system: str, args: list[str]) -> list[str]:
        """The command line of ``system``'s runner script with ``args`` (DeLFT's in its own venv)."""
        if system == "delft":
            return [str(self.delft_python), str(PEERS_DIR / "delft_runner.py"), *self.threads, *args]
        if system == "wapiti":  # Wapiti's --nthread: one thread unless --threads says otherwise
            return [sys.executable, str(PEERS_DIR / "wapiti_runner.py"), "--threads", self.threads[-1] if self.threads else "1",
                    *args]
        return [sys.executable, str(PEERS_DIR / "textorch_runner.py"), "--cache-dir", str(self.cache), *self.threads, *args]

    def run(self, name: str, cmd: list[str], expect_json: bool = True,
            env: dict[str, str] | None = None) -> tuple[dict | None, float]:
        """``(payload or None, wall seconds)`` of one process (in ``env``, default the suite's);
        stderr goes to a log file."""
        log = self.logs / f"{name}.log"
        cpu_before = wapiti_runner.children_cpu_s()
        started = time.perf_counter()
        with open(log, "w", encoding="utf-8") as err:
            done = subprocess.run(cmd, cwd=self.work, stdout=subprocess.PIPE, stderr=err, text=True,
                                  env=self.env if env is None else env)
        wall = time.perf_counter() - started
        cpu_s = wapiti_runner.children_cpu_s() - cpu_before  # this process alone: the runs are one after another
        lines = [line for line in done.stdout.splitlines() if line.startswith("BENCH_JSON ")]
        if done.returncode != 0 or (expect_json and not lines):
            self.failures.append(f"{name}: exit {done.returncode}, see {log}")
            print(f"  FAILED {name} (exit {done.returncode}); log: {log}", flush=True)
            return None, wall
        payload = json.loads(lines[-1][len("BENCH_JSON "):]) if lines else {}
        payload.setdefault("process_cpu_s", cpu_s)
        return payload, wall

    def runner(self, system: str, name: str, args: list[str]) -> tuple[dict | None, float]:
        """:meth:`run` of ``system``'s runner script, logged as ``SYSTEM-NAME``. Training runs
        without :func:`allocator_env`: each system's training keeps its own allocator choice
        (textorch's training commands hold glibc's mmap threshold, DeLFT and Wapiti leave it),
        as its users get it, so its peak memory is what they see."""
        env = self.env if args[:1] != ["train"] else {k: v for k, v in self.env.items() if k not in ALLOCATOR_VARIABLES}
        return self.run(f"{system}-{name}", self.command(system, args), env=env)


def textorch_cli() -> list[str]:
    """The command that starts textorch's own command line (``seq tag``, ``export onnx``) in this
    venv: its ``textorch`` script, or the module where the script is not installed."""
    script = Path(sys.executable).parent / "textorch"
    return [str(script)] if script.exists() else [sys.executable, "-m", "textorch.cli.main"]
