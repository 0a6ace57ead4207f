"""The package's import graph has no circle, lazy imports included.

import-linter's contracts see the imports it resolves, but a circle can hide from them
behind an import inside a function (made lazy to break it at import time) or inside a
part no contract covers. This reads every module of ``durable_steps`` with ``ast`` --
the imports at the top and those inside functions alike -- and fails on any cycle,
naming its modules in order, so a circle cannot come back unseen.

An import of a package's ``__init__`` counts as an import of that module only (``from
. import values`` is an import of ``values``): what a package re-exports is the
package's business, not a circle of its children.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import durable_steps

SRC = Path(durable_steps.__file__).parent
ROOT = SRC.name


def modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted(src.rglob("*.py")):
        parts = [src.name, *path.relative_to(src).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, known: Mapping[str, Path]) -> Iterator[str]:
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                kept = package[: len(package) - node.level + 1]
                base = ".".join([*kept, node.module] if node.module else kept)
            else:
                base = node.module or ""
            submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            yield from submodules
            if len(submodules) < len(node.names):
                yield base


def graph(known: Mapping[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of modules of the package (the nearest module named)."""
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        edges[name] = set()
        for imported in _imported(name, path, known):
            target = imported
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges[name].add(target)
    return edges


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one
    cycle through its modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_path_through(set(component), edges))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _path_through(component: set[str], edges: Mapping[str, set[str]]) -> list[str]:
    """One cycle inside a component, from its first module back to it (breadth first)."""
    start = min(component)
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(edges[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in came:
                    came[w] = v
                    following.append(w)
        frontier = following
    return sorted(component)


def test_the_package_imports_in_no_circle() -> None:
    found = cycles(graph(modules()))
    assert not found, "import circles (lazy imports included): " + "; ".join(
        " -> ".join(c) for c in found
    )


def test_a_circle_through_a_lazy_import_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import a\n")
    (package / "sub" / "a.py").write_text("from .b import f\n")
    (package / "sub" / "b.py").write_text("def f():\n    from . import a\n    return a\n")
    (package / "c.py").write_text("from .sub import b\n")
    assert cycles(graph(modules(package))) == [["pkg.sub.a", "pkg.sub.b", "pkg.sub.a"]]
