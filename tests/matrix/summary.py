"""Print the kind × capability matrix at the end of a test session that ran any of its cells.

Its hooks are imported by tests/conftest.py, the conftest every session loads first: under
pytest-xdist the controller collects nothing, so a conftest in this package would never be seen
there, while the reports of every worker reach the controller's `pytest_runtest_logreport`.

Each test in this package is one capability parametrized over the kinds (`[kind]`, or
`[kind-...]` with more parameters); the summary shows a row per kind and a column per
capability, so a missing capability reads as a named cell (ok / FAIL / skip).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from .cases import KINDS

_CELLS: dict[tuple[str, str], str] = {}
_RANK = {"ok": 0, "skip": 1, "FAIL": 2}


def pytest_runtest_logreport(report: Any) -> None:
    if "tests/matrix/" not in report.nodeid.replace("\\", "/"):
        return
    found = re.search(r"::test_(\w+)\[(\w+)", report.nodeid)
    if found is None or found.group(2) not in KINDS:
        return
    key = (found.group(2), found.group(1))
    if report.failed:
        mark = "FAIL"
    elif report.skipped:
        mark = "skip"
    elif report.when == "call":
        mark = "ok"
    else:
        return
    if _RANK[mark] >= _RANK.get(_CELLS.get(key, "ok"), 0) or key not in _CELLS:
        _CELLS[key] = mark


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _CELLS:
        return
    capabilities = sorted({cap for _, cap in _CELLS})
    rows: dict[str, dict[str, str]] = defaultdict(dict)
    for (kind, cap), mark in _CELLS.items():
        rows[kind][cap] = mark
    write = terminalreporter.write_line
    terminalreporter.section("kind × capability matrix (issue 26)")
    write(f"{'':<40} " + "  ".join(f"{k[:4]:>4}" for k in KINDS))
    for cap in capabilities:
        cells = "  ".join(f"{rows[k].get(cap, '-'):>4}" for k in KINDS)
        write(f"{cap[:40]:<40} {cells}")
