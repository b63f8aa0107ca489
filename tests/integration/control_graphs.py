"""Small graphs for the run-control tests: a loop that never ends, a flaky node, a failing node."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Gate, Lab, LabGraph, Verdict, interrupt, report_progress, run_subgraph


@dataclass
class Laps:
    count: int = 0
    until: int = -1
    """Spin ends once `count` reaches it (-1: never)."""
    log: list[str] = field(default_factory=list)


@dataclass
class Spin(BaseNode[Laps, None, int]):
    """Goes round until `state.until` (forever by default): only a step limit (or a person) stops it."""

    async def run(self, ctx: GraphRunContext[Laps, None]) -> Spin | End[int]:
        ctx.state.count += 1
        if ctx.state.count == ctx.state.until:
            return End(ctx.state.count)
        return Spin()


def spinner(lab: Lab, name: str = "spinner", **graph_kwargs: object) -> LabGraph:
    g = lab.graph(name, state_type=Laps, output_type=int, **graph_kwargs)  # type: ignore[arg-type]
    g.node(Spin)
    return g


@dataclass
class Ok(BaseNode[Laps, None, int]):
    async def run(self, ctx: GraphRunContext[Laps, None]) -> Boom:
        ctx.state.log.append("ok")
        return Boom()


@dataclass
class Boom(BaseNode[Laps, None, int]):
    """Raises ValueError (after changing the state, which a failure must not keep)."""

    async def run(self, ctx: GraphRunContext[Laps, None]) -> End[int]:
        ctx.state.log.append("boom")
        raise ValueError("the tool said no")


def failing(lab: Lab, name: str = "failing") -> LabGraph:
    g = lab.graph(name, state_type=Laps, output_type=int)
    g.node(Ok)
    g.node(Boom)
    return g


@dataclass
class Script:
    """The deps of `Flaky`: what each try does, in order (an exception to raise, "sleep", or None: succeed)."""

    plan: list[object]
    tries: int = 0


@dataclass
class Prep(BaseNode[Laps, Script, int]):
    async def run(self, ctx: GraphRunContext[Laps, Script]) -> Flaky:
        ctx.state.log.append("prep")
        return Flaky()


@dataclass
class Flaky(BaseNode[Laps, Script, int]):
    """Changes the state, then does what its script says for this try."""

    async def run(self, ctx: GraphRunContext[Laps, Script]) -> End[int]:
        script = ctx.deps
        what = script.plan[script.tries] if script.tries < len(script.plan) else None
        script.tries += 1
        ctx.state.count += 1
        ctx.state.log.append(f"try {script.tries}")
        if isinstance(what, BaseException):
            raise what
        if what == "sleep":
            await asyncio.sleep(60)
        return End(ctx.state.count)


def flaky(lab: Lab, name: str = "flaky", **policy: object) -> LabGraph:
    g = lab.graph(name, state_type=Laps, deps_type=Script, output_type=int)
    g.node(Prep)
    g.node(**policy)(Flaky) if policy else g.node(Flaky)  # type: ignore[call-overload]
    return g


@dataclass
class Asker(BaseNode[Laps, None, int]):
    """Asks a person (`interrupt()`) before it ends."""

    async def run(self, ctx: GraphRunContext[Laps, None]) -> End[int]:
        answer = interrupt("go on?")
        ctx.state.log.append(str(answer))
        return End(ctx.state.count)


@dataclass
class Working(BaseNode[Laps, None, int]):
    """Reports its progress twice, then ends."""

    async def run(self, ctx: GraphRunContext[Laps, None]) -> End[int]:
        report_progress(0.5, stage="half")
        ctx.state.count += 1
        report_progress(1.0)
        return End(ctx.state.count)


# -- subgraphs: a parent whose station runs a child graph -------------------------------------------

CHILD: dict[str, object] = {}
"""The child graph `Delegate` runs (each test puts its own here)."""


@dataclass
class Note:
    visits: list[str] = field(default_factory=list)


@dataclass
class Intro(BaseNode[Note, None, str]):
    """The child's first station: it must run once, also when the child is continued."""

    async def run(self, ctx: GraphRunContext[Note, None]) -> AskName:
        ctx.state.visits.append("Intro")
        return AskName()


@dataclass
class AskName(BaseNode[Note, None, str]):
    async def run(self, ctx: GraphRunContext[Note, None]) -> End[str]:
        ctx.state.visits.append("AskName")
        name = interrupt("whose name?")
        return End(f"hello {name}")


def child_graph(lab: Lab, name: str = "child") -> LabGraph:
    g = lab.graph(name, state_type=Note, output_type=str)
    g.node(Intro)
    g.node(AskName)
    return g


@dataclass
class Prepare(BaseNode[Laps, None, str]):
    async def run(self, ctx: GraphRunContext[Laps, None]) -> Delegate:
        ctx.state.log.append("prepare")
        return Delegate()


@dataclass
class Delegate(BaseNode[Laps, None, str]):
    """Runs the child graph as one station and keeps its output."""

    async def run(self, ctx: GraphRunContext[Laps, None]) -> End[str]:
        out = await run_subgraph(CHILD["graph"], Intro(), state=Note())
        ctx.state.log.append(str(out))
        return End(str(out))


def parent_graph(lab: Lab, name: str = "parent") -> LabGraph:
    g = lab.graph(name, state_type=Laps, output_type=str)
    g.node(Prepare)
    g.node(Delegate)
    return g


@dataclass
class Confirm(Gate[Note]):
    """A gate inside the child graph."""

    prompt = "ship it?"

    async def decide(self, ctx: GraphRunContext[Note, None], verdict: Verdict) -> End[str]:
        return End("shipped" if verdict.approved else "held")


def gated_child(lab: Lab, name: str = "gated_child") -> LabGraph:
    g = lab.graph(name, state_type=Note, output_type=str)
    g.node(Confirm)
    return g
