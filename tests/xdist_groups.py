"""How `scripts/test.sh` splits the suite over two pytest-xdist workers (`-n 2 --dist loadgroup`).

Tests that share one expensive process run on one worker, one after the other: the browser tests
share a JupyterLab and a Chromium (package fixtures in tests/browser/conftest.py), the Ray tests one
session Ray (`ray_session` in tests/conftest.py). Everything else is handed out test by test.

xdist's own `xdist_group` mark cannot do it with pytest 9 (xdist 3.8 renames a marked test's node id
through an attribute pytest 9 no longer reads, so every test lands in a group of its own). So the
controller, which sees only node ids, is given the groups by path (`group_of`) through xdist's
documented scheduling hook, and each worker checks at collection that every test using the session
Ray sits in a module `RAY_MODULES` names (`check_ray_modules`), so a new Ray test cannot start a
second Ray on the other worker unnoticed.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

RAY_MODULES = frozenset({
    "tests/matrix/test_matrix_map.py",
    "tests/store/test_batch.py",
    "tests/store/test_batch_chunks.py",
    "tests/evals/test_evaluate_kinds.py",
    "tests/evals/test_bench_evaluate_smoke.py",
    "tests/evals/test_evaluate_spans.py",
})
"""The test modules whose tests use the session Ray (`ray_session`)."""

BROWSER_PACKAGES = ("tests/browser/", "tests/evals/browser/")


def group_of(nodeid: str) -> str:
    """The group a test runs in: 'browser', 'ray', or its own node id (a group of one)."""
    module = nodeid.split("::", 1)[0]
    if module.startswith(BROWSER_PACKAGES):
        return "browser"
    if module in RAY_MODULES:
        return "ray"
    return nodeid


class GroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with `group_of` as the scope: a group goes to one worker whole."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


def check_ray_modules(items: list[Any], rootpath: Any) -> None:
    """Fail the collection (naming the module) if a test using `ray_session` is outside `RAY_MODULES`."""
    import pytest

    for item in items:
        if "ray_session" not in getattr(item, "fixturenames", ()):
            continue
        module = item.path.relative_to(rootpath).as_posix()
        if module not in RAY_MODULES:
            raise pytest.UsageError(
                f"{item.nodeid} uses the session Ray but {module} is not in tests/xdist_groups.py RAY_MODULES: "
                "add it there, so its tests run on the worker that holds the session Ray"
            )
