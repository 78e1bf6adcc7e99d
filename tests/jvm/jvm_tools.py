"""What the JVM test needs, found or made: a JDK, and JEP built against it for this Python.

JEP (Java's embedded CPython, what GROBID runs DeLFT with) is a C extension compiled against a
JDK and the running Python, so it is built once per (JEP, Python, JDK) into a cache directory
and never into the project's environment: ``$TEXTORCH_JVM_TEST_CACHE``, else
``$XDG_CACHE_HOME/textorch/jvm-test`` (``~/.cache/textorch/jvm-test``). ``.ci/jvm-setup`` runs
this file first, so the build's time shows in CI's log rather than inside a test:

    python tests/jvm/jvm_tools.py     # find or build JEP; prints where, and how long a build took

Nothing here imports textorch or pytest.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

JEP_REQUIREMENT = "jep==4.3.2"
"""The JEP release GROBID's documentation pairs with recent releases; pinned so the cache key holds."""

BUILD_TIMEOUT_S = 900


class Unavailable(Exception):
    """No JDK, or no JEP could be built: the message says which and what to do."""


@dataclass(frozen=True)
class Jvm:
    """A JDK and the JEP built for it: what starting the Java side of the test needs."""

    java_home: Path
    jep_package: Path
    """The ``jep`` directory: its jar, and ``libjep.so`` (what ``java.library.path`` must hold)."""

    @property
    def java(self) -> Path:
        return self.java_home / "bin" / "java"

    @property
    def javac(self) -> Path:
        return self.java_home / "bin" / "javac"

    @property
    def jar(self) -> Path:
        return next(self.jep_package.glob("jep-*.jar"))


def find_java_home() -> Path:
    """``$JAVA_HOME`` when it holds ``bin/javac``, else the JDK of the ``javac`` on ``PATH``."""
    given = os.environ.get("JAVA_HOME")
    if given and (Path(given) / "bin" / "javac").is_file():
        return Path(given)
    javac = shutil.which("javac")
    if javac is None:
        raise Unavailable("no JDK: javac is neither on PATH nor under $JAVA_HOME (Debian: apt-get install "
                          "openjdk-17-jdk-headless; .ci/jvm-setup does it)")
    return Path(javac).resolve().parents[1]


def cache_root() -> Path:
    given = os.environ.get("TEXTORCH_JVM_TEST_CACHE")
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "textorch" / "jvm-test"


def jep_target(java_home: Path) -> Path:
    """The cache folder of JEP for this Python and this JDK (a rebuilt JDK or Python gets its own)."""
    javac = subprocess.run([str(java_home / "bin" / "javac"), "-version"], capture_output=True, text=True,
                           check=False, timeout=60)
    identity = "\n".join([JEP_REQUIREMENT, sys.version, sys.base_prefix, str(java_home.resolve()),
                          (javac.stdout + javac.stderr).strip()])
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    python = f"py{sys.version_info.major}.{sys.version_info.minor}"
    return cache_root() / f"{JEP_REQUIREMENT.replace('==', '-')}-{python}-{digest}"


def jvm(build: bool = True) -> tuple[Jvm, float | None]:
    """The JDK and JEP, JEP built first when it is not in the cache and ``build`` allows it;
    with the seconds that build took (``None``: found in the cache)."""
    java_home = find_java_home()
    target = jep_target(java_home)
    if (target / "jep" / "libjep.so").is_file():
        return Jvm(java_home, target / "jep"), None
    if not build:
        raise Unavailable(f"JEP is not built in {target}: run python tests/jvm/jvm_tools.py")
    started = time.perf_counter()
    _build(java_home, target)
    return Jvm(java_home, target / "jep"), time.perf_counter() - started


def _build(java_home: Path, target: Path) -> None:
    """``pip install --target`` into a fresh folder renamed into place when complete, so a
    crashed or concurrent build never leaves a half-built JEP under the cache's name."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "--target", str(partial), JEP_REQUIREMENT]
    try:
        done = subprocess.run(command, env={**os.environ, "JAVA_HOME": str(java_home)}, capture_output=True,
                              text=True, check=False, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        shutil.rmtree(partial, ignore_errors=True)
        raise Unavailable(f"building {JEP_REQUIREMENT} took over {BUILD_TIMEOUT_S} s") from None
    if done.returncode != 0 or not (partial / "jep" / "libjep.so").is_file():
        shutil.rmtree(partial, ignore_errors=True)
        lines = [x.strip() for x in (done.stderr + done.stdout).splitlines() if x.strip() and "WARNING" not in x]
        tail = " | ".join(lines[-6:])[-1500:]
        raise Unavailable(f"{JEP_REQUIREMENT} could not be built against {java_home} for {sys.executable} "
                          f"(it needs the JDK's headers and Python's, and {JEP_REQUIREMENT} from the package "
                          f"index): {tail}")
    try:
        os.rename(partial, target)
    except OSError:  # another process finished the same build first
        shutil.rmtree(partial, ignore_errors=True)


def python_paths() -> list[str]:
    """What the embedded interpreter must find besides the bridge: this environment's
    site-packages (GROBID adds its virtualenv's; an editable install's hook does not run there)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def python_library_dir() -> str:
    """The directory of ``libpython`` (JEP's library links to it)."""
    return str(sysconfig.get_config_var("LIBDIR") or "")


if __name__ == "__main__":
    try:
        found, seconds = jvm(build=True)
    except Unavailable as exc:
        raise SystemExit(f"jvm_tools: {exc}") from None
    how = "found in the cache" if seconds is None else f"built in {seconds:.1f} s"
    print(f"jvm_tools: {JEP_REQUIREMENT} for {sys.executable} and {found.java_home}: {how}, {found.jep_package}")
