"""Every kind of graph evaluates (tests/matrix's kinds: node classes, steps, adopted, parallel,
super-step model, subroutine, workflow, delegated agent), in this process and on Ray.

- plain: every case's run ends done with the kind's output and passes `EqualsExpected`; a delegated
  agent's token usage reaches the case (and the report's metrics)
- gate: every case waits at its gate (waiting, not failed); an approved one is scored on the next
  `evaluation.run()`, the other still waits
- on Ray (2 workers, the session's Ray): the same plain cases, driven by the batch workers
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected

from lab import Lab
from lab.batch import StartWith, release_workers
from tests.matrix.cases import KINDS, case_named

pytestmark = [pytest.mark.timeout(600)]


def _dataset(case: Any, graph: Any, variant: str, n: int) -> Dataset:
    expected = case.expected(variant)
    cases = [
        Case(name=f"{variant} {i}", inputs=StartWith(**case.subgraph_call(graph)), expected_output=expected)
        for i in range(n)
    ]
    return Dataset(name=f"{case.name}-{variant}", cases=cases, evaluators=[EqualsExpected()])


def _check_plain(ev: Any, kind: str, n: int) -> None:
    rows = ev.rows()
    assert [(r.status, r.assertions, r.error) for r in rows] == [
        ("scored", {"EqualsExpected": True}, None)
    ] * n, rows
    assert ev.averages().assertions == 1.0
    if kind == "agent":  # the delegated station's job usage is the case's tokens
        assert all(r.usage.get("input_tokens", 0) > 0 for r in rows), [r.usage for r in rows]
        assert ev.averages().metrics["input_tokens"] > 0


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_evaluates_in_process(kind: str, tmp_path: Path) -> None:
    case = case_named(kind)
    lab = Lab(str(tmp_path / "lab.duckdb"))
    try:
        plain = case.build(lab, "plain")
        ev = lab.evaluate(plain, _dataset(case, plain, "plain", 3), progress=False)
        _check_plain(ev, kind, 3)
        assert [lab.resume(r.run_id).status for r in ev.rows()] == ["done"] * 3

        gated = case.build(lab, "gate")
        ev = lab.evaluate(gated, _dataset(case, gated, "gate", 2), progress=False)
        assert ev.counts() == {"waiting": 2}
        ev.open(0).approve(note="ok")
        ev.run(progress=False)
        rows = ev.rows()
        assert [(r.status, r.assertions) for r in rows] == [
            ("scored", {"EqualsExpected": True}),
            ("waiting", {}),
        ]
    finally:
        lab.close()


@pytest.fixture(scope="module", autouse=True)
def _release_workers() -> Iterator[None]:
    yield
    release_workers()


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_evaluates_on_ray(kind: str, tmp_path: Path, ray_session: str) -> None:
    case = case_named(kind)
    lab = Lab(str(tmp_path / "lab.duckdb"))
    try:
        plain = case.build(lab, "plain")
        ev = lab.evaluate(plain, _dataset(case, plain, "plain", 3), workers=2, progress=False)
        _check_plain(ev, kind, 3)
        gated = case.build(lab, "gate")
        ev = lab.evaluate(gated, _dataset(case, gated, "gate", 2), workers=2, progress=False)
        assert ev.counts() == {"waiting": 2}
    finally:
        lab.close()
