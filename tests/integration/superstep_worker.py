"""A worker process for the super-step model's "paused between steps" test (issue 24 item 9).

    python superstep_worker.py DBPATH   # starts a run, takes one step, prints the run id, exits normally

The graph is `declare(lab)`: start -> a -> b -> End on the super-step model, each node adding
its name to `Trail.log`. The test process declares the same graph to resume the run.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pydantic_graph import StepContext  # noqa: E402

from lab import Lab, LabGraph  # noqa: E402
from lab.reducers import append  # noqa: E402


@dataclass
class Trail:
    log: list[str] = field(default_factory=list)


def declare(lab: Lab) -> LabGraph:
    g = lab.graph("paused_model", state_type=Trail, model="superstep", reducers={"log": append})

    @g.step
    async def a(ctx: StepContext[Trail, None, None]) -> dict[str, Any]:
        return {"log": ["a"]}

    @g.step
    async def b(ctx: StepContext[Trail, None, None]) -> dict[str, Any]:
        return {"log": ["b"]}

    g.add(g.edge_from(g.start_node).to(a), g.edge_from(a).to(b), g.edge_from(b).to(g.end_node))
    return g


def main(argv: list[str]) -> int:
    from tests.integration import superstep_worker as same  # the module (and names) the test process uses

    lab = Lab(argv[0])
    run = same.declare(lab).start(inputs=None, state=same.Trail())
    run.step()  # one step, then the process ends normally with the run paused between steps
    print(run.id, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
