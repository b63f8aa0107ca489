"""The graph kinds sit below the `Lab` facade and import each other one way (issue 26, "the kinds").

Read from the source (nothing is imported): every import a kind module performs when it runs --
at the top or inside a function -- counts; only `if TYPE_CHECKING:` imports (annotations) do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KIND_PACKAGES = ("lab/batch", "lab/subroutine", "lab/workflow", "lab/agents")
KIND_MODULES = ("lab/graph.py", "lab/adopt.py", "lab/builder.py", "lab/built.py", "lab/native_read.py")
ENTRY_POINTS = {"lab.subroutine.worker"}
"""`python -m lab.subroutine.worker`: a process's main, above the facade (nothing imports it)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _kind_files() -> dict[str, Path]:
    files = [ROOT / m for m in KIND_MODULES]
    for pkg in KIND_PACKAGES:
        files += sorted((ROOT / pkg).glob("*.py"))
    return {_module_name(p): p for p in files if p.exists()}


def _runtime_imports(name: str, path: Path) -> list[tuple[str, str]]:
    """(module, imported name) for every import the module runs, resolved to absolute module names."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.extend((a.name, "") for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level > 1:
                base = base[: len(base) - (node.level - 1)]
            module = node.module if node.level == 0 else ".".join(base + ([node.module] if node.module else []))
            out.extend((module or "", a.name) for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def test_kinds_never_import_the_lab_facade_at_run_time() -> None:
    """issue 26 (the kinds): a kind reaches the lab it was given, never the module `lab.lab`."""
    offenders = []
    for name, path in _kind_files().items():
        if name in ENTRY_POINTS:
            continue
        for module, imported in _runtime_imports(name, path):
            if module == "lab.lab" or (module == "lab" and imported in ("lab", "Lab")):
                offenders.append(f"{name} imports {module}.{imported}".rstrip("."))
    assert offenders == []


def test_kinds_import_no_private_name_of_another_module() -> None:
    """issue 26 (the kinds): no `from x import _name` between modules."""
    offenders = [
        f"{name} imports {module}.{imported}"
        for name, path in _kind_files().items()
        for module, imported in _runtime_imports(name, path)
        if imported.startswith("_") and not imported.startswith("__")
    ]
    assert offenders == []


def test_kind_modules_import_each_other_one_way() -> None:
    """issue 26 (the kinds): graph -> builder -> native_read -> built, adopt above them; the modules of
    lab.subroutine and lab.workflow in no circle (counting imports made inside functions)."""
    files = _kind_files()
    known = set(files)

    def target(module: str, imported: str) -> str | None:
        for candidate in (f"{module}.{imported}", module):
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate:
                return candidate
        return None

    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        deps = {target(m, i) for m, i in _runtime_imports(name, path)}
        # a package's __init__ re-exporting its children is the package's face, not a dependency
        edges[name] = {d for d in deps if d and d != name and not (path.name == "__init__.py" and d.startswith(name + "."))}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            here = todo.pop()
            for nxt in edges.get(here, ()):
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    circles = sorted(f"{a} <-> {b}" for a in edges for b in edges[a] if a < b and reaches(b, a)) + sorted(
        f"{a} <-> {b}" for a in edges for b in edges[a] if b < a and reaches(b, a) and a not in edges.get(b, ())
    )
    assert circles == []
