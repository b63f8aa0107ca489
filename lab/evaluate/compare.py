"""`lab.compare_evaluations(a, b)`: two evaluations of the same data set side by side.

Cases are matched by name. For each case: every score of both with its change, the assertions
passed of both, and whether the case got worse (a score went down, an assertion that held now
fails, or a case that was scored now failed). The comparison displays as a table, worse cases
first, under a plot of the per-case changes; `worse()` lists those cases' names.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ArgumentError
from .evaluation import CaseRow, Evaluation, open_evaluation
from .report import fmt

if TYPE_CHECKING:
    from ..lab import Lab

__all__ = ("Comparison", "ComparedCase", "compare_evaluations")

PASSED = "assertions passed"
"""The name under which a case's count of passed assertions is compared."""


def _values(row: CaseRow | None) -> dict[str, float]:
    if row is None or row.status != "scored":
        return {}
    out = {k: float(v) for k, v in row.scores.items()}
    if row.assertions:
        out[PASSED] = float(sum(1 for v in row.assertions.values() if v))
    return out


@dataclass(frozen=True)
class ComparedCase:
    """One case in both evaluations."""

    name: str
    before: CaseRow | None
    after: CaseRow | None

    def value(self, name: str, side: str) -> float | None:
        return _values(self.before if side == "before" else self.after).get(name)

    def delta(self, name: str) -> float | None:
        """`after - before` of score `name` (or of the assertions passed), None when either lacks it."""
        a, b = self.value(name, "before"), self.value(name, "after")
        return None if a is None or b is None else b - a

    @property
    def worse(self) -> bool:
        """A score went down, an assertion that held fails now, or the case no longer scores."""
        if (
            self.before is not None
            and self.before.status == "scored"
            and (self.after is None or self.after.status == "failed")
        ):
            return True
        if any((d := self.delta(n)) is not None and d < 0 for n in _values(self.before)):
            return True
        before, after = self.before, self.after
        return bool(
            before
            and after
            and any(v and after.assertions.get(k) is False for k, v in before.assertions.items())
        )


def compare_evaluations(lab: Lab, a: Evaluation | str, b: Evaluation | str) -> Comparison:
    """Compare evaluation `a` (before) with `b` (after): objects or ids in the store."""
    first, second = (open_evaluation(lab, e) if isinstance(e, str) else e for e in (a, b))
    for e in (first, second):
        if not isinstance(e, Evaluation):
            raise ArgumentError(
                f"lab.compare_evaluations({e!r}): pass two evaluations (lab.evaluate's results or their ids)"
            )
    if first.record.dataset != second.record.dataset:
        raise ArgumentError(
            f"lab.compare_evaluations: {first.id!r} is of data set {first.record.dataset!r} and {second.id!r} of "
            f"{second.record.dataset!r}; compare two evaluations of the same data set"
        )
    return Comparison(first, second)


class Comparison:
    """Two evaluations of one data set, case by case (`rows()`, `worse()`, `averages()`)."""

    def __init__(self, before: Evaluation, after: Evaluation):
        self.before = before
        self.after = after

    def rows(self) -> list[ComparedCase]:
        """Every case of either, in the first evaluation's order, then those only the second has."""
        a = {r.name: r for r in self.before.rows()}
        b = {r.name: r for r in self.after.rows()}
        names = list(a) + [n for n in b if n not in a]
        return [ComparedCase(n, a.get(n), b.get(n)) for n in names]

    def metrics(self) -> list[str]:
        """What is compared: every score name of either, then the assertions passed."""
        names = sorted({n for c in self.rows() for n in (*_values(c.before), *_values(c.after))} - {PASSED})
        has_assertions = any(PASSED in _values(c.before) or PASSED in _values(c.after) for c in self.rows())
        return [*names, *([PASSED] if has_assertions else [])]

    def worse(self) -> list[str]:
        """The names of the cases that got worse."""
        return [c.name for c in self.rows() if c.worse]

    def averages(self) -> dict[str, tuple[Any, Any]]:
        """pydantic-evals' averages of both: each score, the assertions' pass rate, the duration."""
        x, y = self.before.averages(), self.after.averages()
        out: dict[str, tuple[Any, Any]] = {
            n: (x.scores.get(n), y.scores.get(n)) for n in sorted({*x.scores, *y.scores})
        }
        out["assertions"] = (x.assertions, y.assertions)
        out["duration"] = (x.task_duration, y.task_duration)
        return out

    def plot(self) -> Any:
        from .plot import comparison_plot

        return comparison_plot(self)

    def __repr__(self) -> str:
        return f"<Comparison {self.before.id} -> {self.after.id}: {len(self.worse())} of {len(self.rows())} cases worse>"

    def export_html(self, path: Any) -> Any:
        """Write the comparison this displays (per-case deltas, the plot) as one self-contained HTML file."""
        from .page import write_page

        title = f"Evaluations compared: {self.before.id} -> {self.after.id}"
        return write_page(path, title, self._repr_html_(), what="comparison")

    def _repr_html_(self) -> str:
        metrics = self.metrics()
        rows = sorted(self.rows(), key=lambda c: not c.worse)
        heads = ["case", "status", *(f"{m} (before → after, Δ)" for m in metrics), "runs"]

        def cell(c: ComparedCase, m: str) -> str:
            a, b, d = c.value(m, "before"), c.value(m, "after"), c.delta(m)
            color = "" if d is None or d == 0 else ("#cf222e" if d < 0 else "#1a7f37")
            delta = "" if d is None else f" ({d:+.3g})"
            return f'<td style="color:{color}">{fmt(a)} → {fmt(b)}{delta}</td>'

        def status(c: ComparedCase) -> str:
            return f"{c.before.status if c.before else '-'} → {c.after.status if c.after else '-'}"

        def runs(c: ComparedCase) -> str:
            return " → ".join(f"<code>{html.escape(r.run_id or '')}</code>" for r in (c.before, c.after) if r)

        body = "".join(
            f"<tr><td>{'<b>worse</b> ' if c.worse else ''}{html.escape(c.name)}</td><td>{status(c)}</td>"
            + "".join(cell(c, m) for m in metrics)
            + f"<td>{runs(c)}</td></tr>"
            for c in rows
        )
        avg = "".join(
            f"<li>{html.escape(k)}: {fmt(a)} → {fmt(b)}</li>" for k, (a, b) in self.averages().items()
        )
        return (
            f"<div><b>{html.escape(self.before.id)}</b> → <b>{html.escape(self.after.id)}</b>: "
            f"{len(self.worse())} of {len(rows)} cases worse</div><ul>{avg}</ul>"
            "<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heads) + "</tr></thead>"
            f"<tbody>{body}</tbody></table>" + self.plot().data
        )
