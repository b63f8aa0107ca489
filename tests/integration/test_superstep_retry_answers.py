"""A retried try of a super-step model node keeps the answers its station was given (issue 26:
"answers reaching their wait ... retries leaking in the model engine")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_graph import StepContext

from lab import Lab, Retry, interrupt


@dataclass
class Log:
    lines: list[str] = field(default_factory=list)


def test_a_try_after_a_failure_gets_the_interrupt_answer_again_instead_of_parking_anew(lab: Lab) -> None:
    """Seed 003: a node's tries happen inside the same step. A node that got its `interrupt()` answer
    and then failed a try asks the same question on the next try: it gets the same answer, the run
    does not park a second time (before the fix it parked again, and the answer never arrived)."""
    g = lab.graph("asks_twice", state_type=Log, model="superstep")
    answers: list[Any] = []

    @g.step(retry=Retry(max_attempts=3, on=(ConnectionError,)))
    async def ask(ctx: StepContext[Log, None, None]) -> dict[str, Any]:
        answers.append(interrupt("which line?"))
        if len(answers) == 1:
            raise ConnectionError("the first try after the answer fails")
        return {"lines": [*ctx.state.lines, answers[-1]]}

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    run = g.start(inputs=None, state=Log())
    run.run()
    assert run.status == "waiting" and run.wait.kind == "interrupt"
    run.resume_with("line 1")
    run.run()
    assert run.status == "done", (run.status, run.wait)
    assert answers == ["line 1", "line 1"] and run.state == Log(lines=["line 1"])
    assert len(run.events("retry")) == 1 and len(run.waits()) == 1
