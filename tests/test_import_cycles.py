"""No import cycle among the modules of either task (``textorch.tagging``, ``textorch.classification``).

import-linter's contracts leave out imports under ``if TYPE_CHECKING:``; this check counts every
import statement, wherever it stands (module level, inside a function, under ``TYPE_CHECKING``),
so a cycle cannot hide in an annotation or in an import put inside a function. The graph is read
from the source (``ast``), so the check imports none of the modules it looks at.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import textorch

SOURCE_ROOT = Path(textorch.__file__).resolve().parent.parent
CHECKED = ("textorch.tagging", "textorch.classification")


def module_files(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """``dotted name: (file, is a package's __init__)`` of every module of ``package`` under ``root``."""
    found = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _imported_names(tree: ast.Module, module: str, is_package: bool, known: dict) -> set[str]:
    """Every name the module's import statements reach, wherever the statements stand."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from package import module`` reaches the module; ``from module import name`` the module
            names |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names}
    return names


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (the nearest known module of each name)."""
    known = module_files(root, package)
    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in known.items():
        targets = set()
        for name in _imported_names(ast.parse(path.read_text(encoding="utf-8")), module, is_package, known):
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """The shortest import chain from ``start`` to ``goal`` (both ends included), or None."""
    before: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for there in sorted(graph[here]):
            if there == goal:
                chain = [goal, here]
                while before[chain[-1]] is not None:
                    chain.append(before[chain[-1]])  # type: ignore[arg-type]
                return chain[::-1]
            if there not in before:
                before[there] = here
                queue.append(there)
    return None


def cycles_within(graph: dict[str, set[str]], prefixes: tuple[str, ...]) -> list[list[str]]:
    """One cycle (``a -> ... -> a``) through each module of ``prefixes`` that is on one, each cycle once."""
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for module in sorted(graph):
        if not module.startswith(prefixes):
            continue
        chain = _reaches(graph, module, module)
        if chain is not None and frozenset(chain) not in seen:
            seen.add(frozenset(chain))
            found.append(chain)
    return found


def test_no_import_cycle_among_the_modules_of_either_task() -> None:
    graph = import_graph(SOURCE_ROOT, "textorch")
    assert {"textorch.tagging.labeler", "textorch.tagging.training", "textorch.classification.classifier"} <= set(graph)
    assert "textorch.tagging.labeler" in graph["textorch.tagging.training"]  # training sits above the model
    cycles = cycles_within(graph, tuple(f"{p}." for p in CHECKED))
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(chain) for chain in cycles)


def test_the_check_sees_imports_inside_functions_and_under_type_checking(tmp_path: Path) -> None:
    """The rule can fail: two modules that import each other only inside a function and under
    ``TYPE_CHECKING``, through a relative import and a package's ``from ... import module``."""
    package = tmp_path / "pkg" / "task"
    package.mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "front.py").write_text("def train():\n    from pkg.task import path\n    return path\n")
    (package / "path.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .front import train\n")
    (package / "alone.py").write_text("import pkg.task.path\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.task.alone"] == {"pkg.task.path"}
    assert cycles_within(graph, ("pkg.task.",)) == [["pkg.task.front", "pkg.task.path", "pkg.task.front"]]
