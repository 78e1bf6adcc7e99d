"""``python -m benchmarks``: the list of benchmarks by kind; ``python -m benchmarks NAME [args]``:
run one, exactly as ``python -m benchmarks.KIND.NAME [args]`` would (its ``__main__`` block, its own
options; ``python -m benchmarks NAME --help`` shows them). Run from the repository root, so that
``benchmarks`` is importable."""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

from benchmarks import RUNNERS, SUITE, kind_of, module_of

REPO = Path(__file__).resolve().parents[1]


def summary(name: str) -> str:
    """First line of a benchmark's docstring, read without importing it (imports load torch)."""
    source = (REPO / (module_of(name).replace(".", "/") + ".py")).read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source)) or ""
    return doc.strip().split("\n")[0]


def listing() -> str:
    """The suite by kind, one line per benchmark, and how to run one."""
    lines = ["usage: python -m benchmarks NAME [args]   (python -m benchmarks NAME --help: its options)", ""]
    for kind, names in SUITE.items():
        lines.append(f"{kind}:" if kind == "setup" else f"{kind}: (benchmarks/{kind}/)")
        width = max(len(n) for n in names)
        lines.extend(f"  {n:<{width}}  {summary(n)}" for n in names)
        lines.append("")
    lines.append("runners, started by the benchmarks above (not run directly): "
                 + ", ".join(f"{kind}/{name}" for name, kind in RUNNERS.items()))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """List the suite, or run the named benchmark with the remaining arguments."""
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(listing())
        return 0
    name, rest = argv[0], argv[1:]
    if kind_of(name) is None:
        print(f"python -m benchmarks: no benchmark named {name!r}\n\n{listing()}", file=sys.stderr)
        return 2
    sys.argv = [f"python -m benchmarks {name}", *rest]
    runpy.run_module(module_of(name), run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
