"""glibc's allocator keeps freed memory in a process that asks for it; the user's settings win."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from textorch.runtime import malloc_tuning
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
    print(keep_freed_memory() if sys.argv[1] == "tune" else False)
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


def _churn(tune: bool) -> tuple[str, int]:
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in malloc_tuning.THRESHOLD_VARIABLES and k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", CHURN, "tune" if tune else "leave"], env=env, capture_output=True,
                          text=True, check=True)
    tuned, faults = done.stdout.split()
    return tuned, int(faults)


@needs_glibc
def test_freed_memory_is_reused_instead_of_faulted_back_in() -> None:
    tuned, faults_tuned = _churn(True)
    untuned, faults_untuned = _churn(False)
    assert (tuned, untuned) == ("True", "False")
    assert faults_untuned >= 1000  # about 2,000 here: much of the 20 MB of each round, page by page
    assert faults_tuned < 100


@pytest.mark.parametrize("variable, value", [
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
    monkeypatch.setattr(malloc_tuning.platform, "libc_ver", lambda: ("", ""))
    monkeypatch.setattr(malloc_tuning.ctypes, "CDLL", lambda *a: pytest.fail("mallopt must not be reached"))
    assert keep_freed_memory() is False


# After a freed block of twice the held threshold has moved glibc's threshold up, where does the
# next block of 1.5 times the held threshold live? mallinfo2's hblkhd counts the bytes in mapped
# blocks: held, the threshold maps it; by glibc's own rule it goes to the heap.
HELD = malloc_tuning.HELD_MMAP_THRESHOLD
PLACEMENT = textwrap.dedent(f"""
    import ctypes, sys
    import numpy as np
    from textorch.runtime.malloc_tuning import bound_heap_growth
    print(bound_heap_growth() if sys.argv[1] == "bound" else False)
    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")]
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = MallInfo2
    big = np.ones({2 * HELD} // 8); del big
    before = mallinfo2().hblkhd
    block = np.ones({3 * HELD // 2} // 8)
    print(mallinfo2().hblkhd - before >= {3 * HELD // 2})
""")


def _placement(bound: bool) -> list[str]:
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in malloc_tuning.THRESHOLD_VARIABLES and k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", PLACEMENT, "bound" if bound else "leave"], env=env,
                          capture_output=True, text=True, check=True)
    return done.stdout.split()


@needs_glibc
def test_a_training_process_maps_its_large_blocks_whatever_was_freed_before() -> None:
    # glibc >= 2.33 has mallinfo2; older ones are not what this machine runs, but say so if met.
    if tuple(int(x) for x in platform.libc_ver()[1].split(".")[:2]) < (2, 33):
        pytest.skip("mallinfo2 needs glibc 2.33")
    assert _placement(True) == ["True", "True"]  # mapped: given back whole when freed
    assert _placement(False) == ["False", "False"]  # glibc's own rule: in the heap, where holes are left


def test_heap_growth_bound_leaves_the_users_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    monkeypatch.setattr(malloc_tuning.ctypes, "CDLL", lambda *a: pytest.fail("mallopt must not be reached"))
    assert malloc_tuning.bound_heap_growth() is False
