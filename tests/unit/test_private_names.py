"""The architecture's three measures hold for the whole library (issue 26 items 2 and 3).

- no module reaches into another object's private attributes: ruff's SLF001 over `lab/` and
  `kernel_ext/` finds nothing, and nobody silenced it with `noqa: SLF001`
- no `from x import _name` between modules of the project
- no module of `lab/` or `kernel_ext/` is over 700 lines

(The import circles are checked by `lint-imports`, run by scripts/test.sh before pytest, and by
tests/unit/test_import_contracts.py.)
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lab", "kernel_ext")
MAX_LINES = 700


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_no_module_reaches_into_another_objects_private_names() -> None:
    found = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--select", "SLF001", "--output-format", "json", "--no-cache",
         "--exit-zero", *PACKAGES],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    reaches = [f"{f['filename']}:{f['location']['row']} {f['message']}" for f in json.loads(found.stdout)]
    assert reaches == [], "use or add a public name instead:\n" + "\n".join(reaches)
    silenced = [f"{p.relative_to(ROOT)}" for p in _sources() if "noqa: SLF001" in p.read_text()]
    assert silenced == []


def test_no_private_name_is_imported_from_another_module() -> None:
    imported = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PACKAGES):
                imported += [
                    f"{path.relative_to(ROOT)}: from {'.' * node.level}{node.module or ''} import {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert imported == []


def test_no_module_is_over_700_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _sources() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}, "split these by what they hold"
