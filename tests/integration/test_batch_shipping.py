"""How `lab.map` ships a graph of any kind to a batch worker (lab/batch/spec.py, runtimes.py), in-process.

The worker's side is `Shipment.declare(Lab(":memory:"))`, exactly what a Ray worker does, so these
run without a Ray cluster; tests/matrix/test_matrix_map.py drives every kind on the session's Ray.
"""

from __future__ import annotations

import dataclasses
import linecache
import threading
from dataclasses import dataclass

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from pydantic_graph import GraphBuilder, StepContext

from lab import Lab
from lab.batch import RuntimeShippingError, StartWith
from lab.batch.spec import Shipment
from lab.batch.worker import NOT_DRIVEN, BatchWorker, Seed
from tests.agents import agent_defs
from tests.agents.graphs import declare as declare_essay
from tests.matrix.k_nodes import CASE as NODES


@dataclass
class Box:
    n: int = 0


@dataclass
class Doubled:
    n: int


def doubler() -> GraphBuilder[Box, None, int, int]:
    b: GraphBuilder[Box, None, int, int] = GraphBuilder(name="doubler", state_type=Box, input_type=int, output_type=int)

    @b.step
    async def seed(ctx: StepContext[Box, None, int]) -> Doubled:
        ctx.state.n = ctx.inputs
        return Doubled(ctx.inputs * 2)

    @b.step
    async def unwrap(ctx: StepContext[Box, None, Doubled]) -> int:
        return ctx.inputs.n

    b.add(b.edge_from(b.start_node).to(seed), b.edge_from(seed).to(unwrap), b.edge_from(unwrap).to(b.end_node))
    return b


def test_a_graph_drawn_live_in_the_notebook_ships_without_its_view(tmp_path) -> None:
    """issue 26 done-when 4 (lab.map on Ray): a graph a live drawing follows (its on_change holds a
    widget's callback) ships to a worker, which declares the same revision; the view stays here."""
    from lab.widgets.graph_view import GraphView

    lab = Lab(str(tmp_path / "lab.duckdb"))
    g = NODES.build(lab, "plain")
    view = GraphView(g)
    shipment = Shipment.of(g)
    worker_lab = Lab(":memory:")
    copy = shipment.declare(worker_lab)
    assert copy is not g and copy.lab is worker_lab and worker_lab.graphs[g.name] is copy
    assert copy.build().manifest.digest == g.build().manifest.digest == shipment.digest
    assert NODES.start(copy).run().output == NODES.expected("plain")
    assert view.spec is not None  # the notebook's view still follows the notebook's graph
    worker_lab.close()
    lab.close()


def test_an_adopted_graph_ships_without_the_locals_it_was_adopted_beside(tmp_path) -> None:
    """issue 26 done-when 4 (lab.map on Ray): `lab.adopt` keeps the building frame's locals to read
    hints; only the types among them travel (a lock, a lab, a run stay in the notebook)."""
    lock = threading.Lock()  # a local that cannot be pickled

    b = doubler()
    Local = Doubled  # noqa: N806 - a type under a local name: kept, as hints may use it
    lab = Lab(str(tmp_path / "lab.duckdb"))
    adopted = lab.adopt(b.build(), name="doubler")
    assert "lock" in adopted.namespace and lock.locked() is False
    worker_lab = Lab(":memory:")
    copy = Shipment.of(adopted).declare(worker_lab)
    assert "lock" not in copy.namespace and "b" not in copy.namespace and copy.namespace["Local"] is Local
    assert copy.start(inputs=21).run().output == 42
    worker_lab.close()
    lab.close()


def test_agent_runtimes_travel_as_targets_and_a_notebook_only_agent_is_refused(tmp_path) -> None:
    """issue 26 done-when 4 (lab.map on Ray): the runtime a delegated station names is registered in
    the worker (found as module:attribute); an agent that lives only here is refused by name,
    before any run of the batch is created."""
    lab = Lab(str(tmp_path / "lab.duckdb"))
    g = declare_essay(lab)
    lab.agents.register("planner", agent_defs.planner)
    shipment = Shipment.of(g)
    assert [(r.name, r.target, r.agent) for r in shipment.runtimes] == [("planner", "tests.agents.agent_defs:planner", None)]
    worker_lab = Lab(str(tmp_path / "worker.duckdb"))
    shipment.declare(worker_lab)
    assert worker_lab.agents.runtime("planner").load() is agent_defs.planner
    worker_lab.close()

    lab.agents.register("planner", Agent(TestModel(), name="only_here"))
    with pytest.raises(RuntimeShippingError, match=r"'planner' lives only in this process.*target="):
        lab.map(g, [StartWith(inputs=None)], progress=False)
    assert len(lab.runs()) == 0
    lab.close()


CELL = '''
async def bump(ctx: StepContext[Box, None, int]) -> int:
    ctx.state.n = ctx.inputs + 1
    return ctx.state.n
'''


def test_a_step_defined_in_a_notebook_cell_ships_with_its_source(tmp_path) -> None:
    """issue 26 done-when 4 (lab.map on Ray): a step function from a notebook cell travels by value
    and its source lives only in the notebook's linecache; the worker reads the same lines, so it
    builds the notebook's revision (without them its fingerprint fell back to bytecode: another
    digest, and the worker refused the graph)."""
    filename = str(tmp_path / "ipykernel_cell_1.py")  # never written: a cell lives only in linecache
    lines = CELL.splitlines(keepends=True)
    linecache.cache[filename] = (len(CELL), None, lines, filename)
    try:
        scope = {"StepContext": StepContext, "Box": Box, "__name__": "notebook_cell"}
        exec(compile(CELL, filename, "exec"), scope)
        lab = Lab(str(tmp_path / "lab.duckdb"))
        g = lab.graph("cell_steps", state_type=Box, input_type=int, output_type=int)
        step = g.step(scope["bump"])
        g.add(g.edge_from(g.start_node).to(step), g.edge_from(step).to(g.end_node))
        shipment = Shipment.of(g)
        assert shipment.sources == {filename: lines}
    finally:
        del linecache.cache[filename]  # the worker's process has no such cell
    worker_lab = Lab(":memory:")
    copy = shipment.declare(worker_lab)
    assert copy.build().manifest.digest == shipment.digest
    assert copy.start(inputs=4).run().output == 5
    worker_lab.close()
    lab.close()


def test_a_worker_that_builds_another_revision_drives_nothing(tmp_path) -> None:
    """issue 26 done-when 4 (lab.map on Ray): a worker whose copy of the graph has another digest
    than the notebook's does not drive the run (it says why; the notebook raises GraphShippingError
    and the run stays as it was, to be driven by `batch.run()` once the graph is fixed)."""
    lab = Lab(str(tmp_path / "lab.duckdb"))
    g = NODES.build(lab, "plain")
    shipment = dataclasses.replace(Shipment.of(g), digest="0" * 16)
    worker = BatchWorker(None, Lab)
    out = worker.run(shipment, Seed("run-that-was-never-sent"))
    assert out.status == NOT_DRIVEN and "not the notebook's 0000000000000000" in (out.error or "")
    assert out.transactions == [] and worker.graphs == {}
    worker.close()
    lab.close()
