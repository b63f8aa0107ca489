"""The suite's split over two xdist workers (tests/xdist_groups.py): what runs together."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.xdist_groups import check_ray_modules, group_of


def test_browser_and_ray_tests_form_one_group_each_and_the_rest_a_group_of_one() -> None:
    assert group_of("tests/browser/test_run_all.py::test_quickstart_under_run_all") == "browser"
    assert group_of("tests/evals/browser/test_evaluate_browser.py::test_x[notebook7]") == "browser"
    assert group_of("tests/matrix/test_matrix_map.py::test_lab_map_on_ray[agent]") == "ray"
    assert group_of("tests/store/test_batch.py::test_y[duckdb]") == "ray"
    other = "tests/integration/test_engine.py::test_z[a::b]"
    assert group_of(other) == other


@dataclass
class _Item:
    nodeid: str
    path: Path
    fixturenames: tuple[str, ...]


def test_a_ray_test_outside_the_named_modules_fails_the_collection_naming_it(tmp_path: Path) -> None:
    inside = _Item("tests/store/test_batch.py::t", tmp_path / "tests/store/test_batch.py", ("ray_session",))
    no_ray = _Item("tests/unit/test_a.py::t", tmp_path / "tests/unit/test_a.py", ("tmp_path",))
    check_ray_modules([inside, no_ray], tmp_path)
    stray = _Item("tests/unit/test_b.py::t", tmp_path / "tests/unit/test_b.py", ("ray_session",))
    with pytest.raises(pytest.UsageError, match=r"tests/unit/test_b.py is not in tests/xdist_groups.py RAY_MODULES"):
        check_ray_modules([inside, stray], tmp_path)
