"""How the suite starts its processes (benchmarks/peers/suite_runner.py): every system's processes
run under the same allocator settings when they tag, which textorch's own tuning then leaves alone;
training processes keep each system's own choice.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.peers import suite_runner

from textorch.runtime.malloc_tuning import MMAP_THRESHOLD, TRIM_THRESHOLD, keep_freed_memory


def test_both_systems_processes_run_under_the_same_allocator_settings(tmp_path, monkeypatch):
    env = suite_runner.allocator_env()
    assert env == {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}
    r = suite_runner.Runner(tmp_path, Path(sys.executable))
    show = "import json, os; print('BENCH_JSON ' + json.dumps({k: os.environ.get(k) for k in %r}))" % list(env)
    for system in ("delft", "textorch"):  # both start through Runner.run, with its environment
        payload, _ = r.run(f"env-{system}", [sys.executable, "-c", show])
        assert {name: payload[name] for name in env} == env  # (Runner.run adds the process's CPU seconds)
    # textorch's own tuning, seeing glibc's variables set, leaves them be: one setting for both.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert keep_freed_memory() is False


def test_training_processes_keep_each_systems_own_allocator_choice(tmp_path, monkeypatch):
    env = suite_runner.allocator_env()
    for name in env:
        monkeypatch.delenv(name, raising=False)
    r = suite_runner.Runner(tmp_path, Path(sys.executable))
    show = "import json, os; print('BENCH_JSON ' + json.dumps({k: os.environ.get(k) for k in %r}))" % list(env)
    monkeypatch.setattr(r, "command", lambda system, args: [sys.executable, "-c", show])
    trained, _ = r.runner("textorch", "train-x", ["train", "--task", "date"])
    tagged, _ = r.runner("textorch", "tag-x", ["tag", "--model", "m"])
    assert {name: trained[name] for name in env} == dict.fromkeys(env)  # glibc's defaults, then the program's own
    assert {name: tagged[name] for name in env} == env
