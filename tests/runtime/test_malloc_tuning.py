"""glibc's allocator keeps freed memory in textorch's own processes; the user's settings win."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from textorch.runtime import malloc_tuning
from textorch.cli.main import main
from textorch.runtime.malloc_tuning import keep_freed_memory

on_glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
needs_glibc = pytest.mark.skipif(not on_glibc, reason="the tuning is glibc's mallopt")

# glibc moves its mmap threshold to 8 MB when the first block is freed (trimming past 16 MB
# free), then five 4 MB blocks come from the heap and are trimmed back to the kernel on every
# round: the same churn as tagging calls, in miniature.
CHURN = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from textorch.runtime.malloc_tuning import keep_freed_memory
    print(keep_freed_memory())
    big = np.ones(8 * 2**20 // 8); del big
    def round_trip():
        held = [np.ones(4 * 2**20 // 8) for _ in range(5)]
        del held
    round_trip()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        round_trip()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 10)
""")


def _churn(env_extra: dict[str, str]) -> tuple[str, int]:
    import os

    env = {k: v for k, v in os.environ.items() if k != malloc_tuning.DISABLE_ENV}
    done = subprocess.run([sys.executable, "-c", CHURN], env={**env, **env_extra}, capture_output=True, text=True,
                          check=True)
    tuned, faults = done.stdout.split()
    return tuned, int(faults)


@needs_glibc
def test_freed_memory_is_reused_instead_of_faulted_back_in() -> None:
    tuned, faults_tuned = _churn({})
    untuned, faults_untuned = _churn({malloc_tuning.DISABLE_ENV: "0"})
    assert (tuned, untuned) == ("True", "False")
    assert faults_untuned >= 1000  # about 2,000 here: much of the 20 MB of each round, page by page
    assert faults_tuned < 100


@pytest.mark.parametrize("variable, value", [
    (malloc_tuning.DISABLE_ENV, "0"),
    ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1048576"),
    ("MALLOC_TRIM_THRESHOLD_", "1048576"),
])
def test_the_users_own_settings_win(variable: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_call(*args, **kwargs):
        raise AssertionError("mallopt must not be reached")

    monkeypatch.setenv(variable, value)
    monkeypatch.setattr(malloc_tuning.ctypes, "CDLL", no_call)
    assert keep_freed_memory() is False


def test_other_c_libraries_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(malloc_tuning.DISABLE_ENV, raising=False)
    monkeypatch.setattr(malloc_tuning.platform, "libc_ver", lambda: ("", ""))
    monkeypatch.setattr(malloc_tuning.ctypes, "CDLL", lambda *a: pytest.fail("mallopt must not be reached"))
    assert keep_freed_memory() is False


def test_the_command_line_tunes_its_own_process(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    calls: list[int] = []
    monkeypatch.setattr("textorch.cli.main.keep_freed_memory", lambda: calls.append(1) or True)
    assert main(["seq", "tag", "--model", str(tmp_path / "missing"), "--input", str(tmp_path / "none.txt")]) == 2
    assert calls == [1]
