"""An adopted graph starts with the same arguments as a declared one (issue 26 done-when 4).

`lab.map` starts every run of a batch with `graph.start(..., tags={"batch": id, "index": i})`;
`AdoptedGraph.start` had no `tags=`, so a batch of an adopted (serial or parallel) graph failed
with a TypeError before its first run was created.
"""

from __future__ import annotations

import inspect

from lab import Lab
from lab.adopt import AdoptedGraph
from lab.graph import LabGraph
from tests.matrix.cases import case_named


def test_adopted_start_takes_every_argument_a_declared_graph_start_takes():
    """Issue 26 done-when 4: the kinds' start() signatures agree (tags= was missing on adopted graphs)."""
    declared = set(inspect.signature(LabGraph.start).parameters)
    adopted = set(inspect.signature(AdoptedGraph.start).parameters)
    assert declared - adopted == set()


def test_tags_of_an_adopted_run_ride_in_its_started_event():
    """Issue 26 done-when 4: `tags` reach the started event of an adopted serial and parallel run."""
    with Lab(":memory:") as lab:
        for kind in ("adopted", "parallel"):
            case = case_named(kind)
            run = case.start(case.build(lab, "plain"), tags={"batch": "b-1", "index": 3})
            (started,) = run.events("started")
            assert started.payload["tags"] == {"batch": "b-1", "index": 3}
            run.run()
            assert run.output == case.expected("plain")
