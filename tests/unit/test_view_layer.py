"""The views (lab.render, lab.widgets, lab.views, kernel_ext) sit on top: nothing below imports
them, and they read runs and graphs through public names only (issue 26, the view layer).

A graph and a run still show themselves (`g.render()`, `display(g)`, `display(run)`): they call
the view registered by name in `lab.display_hooks`, which `lab.views` fills when `lab` is imported.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import lab
from tests.conftest import declare_counter

ROOT = Path(lab.__file__).resolve().parent.parent
VIEWS = ("lab.render", "lab.share", "lab.widgets", "lab.views", "kernel_ext")
"""The view layer: modules (and packages) nothing below them may import (lab.share: the HTML export, compare)."""
ABOVE_VIEWS = ("lab", "lab.bench")
"""The package facade (it registers the views) and the benchmarks (they time the drawing)."""


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for top in ("lab", "kernel_ext"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path) -> list[tuple[str, str]]:
    """(module imported, name imported or '') for every import that runs, inside functions too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((a.name, "") for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for a in node.names:
                out.append((module, a.name))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return out


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _is_view(module: str) -> bool:
    return _in(module, VIEWS)


def test_nothing_below_the_views_imports_them():
    """issue 26 (views): no kind, kernel or core module imports lab.render / lab.widgets /
    kernel_ext, not even lazily inside a function (a graph's drawing and the run widget are
    reached through lab.display_hooks). On main, lab.run imported lab.widgets, lab.graph
    lab.render, lab.workflow.compile lab.render.spec and lab.batch.batch lab.widgets."""
    wrong = []
    for name, path in _modules().items():
        if _is_view(name) or name in ABOVE_VIEWS or _in(name, ABOVE_VIEWS[1:]):
            continue
        for module, imported in _imports(name, path):
            target = f"{module}.{imported}" if imported else module
            if _is_view(module) or _is_view(target):
                wrong.append(f"{name} imports {target}")
    assert wrong == []


def test_the_drawing_modules_import_each_other_one_way():
    """issue 26 (views): lab.render.spec and lab.render.native no longer import each other
    (spec_for / edge_labels, which need both, live in lab.render.handle)."""
    modules = _modules()
    deps = {
        name: {m for m, _ in _imports(name, path) if m.startswith("lab.render.") and m != name}
        for name, path in modules.items()
        if name.startswith("lab.render.")
    }
    assert "lab.render.native" not in deps["lab.render.spec"]
    circles = [(a, b) for a, targets in deps.items() for b in targets if a in deps.get(b, set())]
    assert circles == []


def test_the_views_use_no_private_names_of_other_modules():
    """issue 26 (views): no `from x import _name` and no `obj._name` (ruff SLF001) in the views.
    On main: kernel_ext read run._state_json and lab._live, the agent panel set owner._alert."""
    modules = _modules()
    imported = [
        f"{name} imports {module}.{what}"
        for name, path in modules.items()
        if _is_view(name)
        for module, what in _imports(name, path)
        if what.startswith("_") and not what.startswith("__")
    ]
    assert imported == []
    paths = [str(p.relative_to(ROOT)) for p in (ROOT / "lab" / "render", ROOT / "lab" / "widgets", ROOT / "kernel_ext")]
    paths.append("lab/views.py")
    found = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "SLF001", "--output-format", "json", "--no-cache",
         "--exit-zero", *paths],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    reaches = [f"{f['filename']}:{f['location']['row']} {f['message']}" for f in json.loads(found.stdout)]
    assert reaches == []


def test_graphs_show_through_the_registered_views(tmp_path):
    """issue 26 (views): `g.render()`, `g.mermaid()` and `display(g)` call the views registered
    in lab.display_hooks (lab.views registers them when `lab` is imported)."""
    from lab import display_hooks, views

    assert {"graph.dot", "graph.mermaid", "graph.svg", "graph.mimebundle", "run.display", "batch.progress"} <= set(
        display_hooks.registered()
    )
    mem = lab.Lab(":memory:")
    try:
        g = declare_counter(mem)
        assert g.render().startswith("digraph") and "stateDiagram-v2" in g.mermaid()
        seen = []
        display_hooks.register("graph.dot", lambda graph, overlay=None: seen.append((graph, overlay)) or "DOT")
        try:
            assert g.render("overlay") == "DOT" and seen == [(g, "overlay")]
        finally:
            display_hooks.register("graph.dot", views.graph_dot)
        assert g.render().startswith("digraph")
    finally:
        mem.close()


def test_an_unregistered_view_says_what_to_do():
    """issue 26 (views): a view nobody registered is a clear error naming the registered ones."""
    from lab import display_hooks

    with pytest.raises(LookupError, match=r"no view is registered for 'nothing.here' \(registered: graph.dot, .*import lab"):
        display_hooks.show("nothing.here", object())
    with pytest.raises(ValueError, match="non-empty str"):
        display_hooks.register("", print)
    with pytest.raises(TypeError, match="must be callable"):
        display_hooks.register("x", "not a function")
