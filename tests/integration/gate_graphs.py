"""Graphs with waits, shared by test_waits.py and the `gate_worker.py` subprocesses.

Module-level classes, so every process builds the same revision (a manifest's digest covers
each node's source). `Draft` asks for a region with `interrupt()`, `ConfirmSend` is a gate,
`Send` ends the run; `Probe` asks for a capability.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import CapabilityRequired, Gate, Lab, LabGraph, Verdict, granted, interrupt


@dataclass
class Mail:
    draft: str = ""
    region: str = ""
    sent: bool = False
    attempts: int = 0
    log: list[str] = field(default_factory=list)


@dataclass
class Draft(BaseNode[Mail, None, str]):
    note: str | None = None

    async def run(self, ctx: GraphRunContext[Mail, None]) -> ConfirmSend:
        ctx.state.attempts += 1  # partial work before the interrupt: never saved
        region = interrupt({"question": "Which region?"})
        ctx.state.region = region
        ctx.state.draft = f"Hello from {region}" + (f" ({self.note})" if self.note else "")
        return ConfirmSend()


@dataclass
class ConfirmSend(Gate[Mail]):
    prompt = "Send the draft to the customer?"

    def details(self, ctx: GraphRunContext[Mail, None]) -> dict[str, str]:
        return {"draft": ctx.state.draft}

    async def decide(self, ctx: GraphRunContext[Mail, None], verdict: Verdict) -> Send | Draft:
        ctx.state.log.append(f"verdict:{verdict.approved}:{verdict.note}")
        return Send() if verdict.approved else Draft(note=verdict.note)


@dataclass
class Send(BaseNode[Mail, None, str]):
    async def run(self, ctx: GraphRunContext[Mail, None]) -> End[str]:
        ctx.state.sent = True
        return End(ctx.state.draft)


def declare_mail(lab: Lab, name: str = "mail") -> LabGraph:
    g = lab.graph(name, state_type=Mail, output_type=str)
    for cls in (Draft, ConfirmSend, Send):
        g.node(cls)
    return g


@dataclass
class Work:
    device: str = ""
    requests: int = 0


@dataclass
class Probe(BaseNode[Work, None, str]):
    satisfied_by: str = "gpu-0"
    """The grant value that satisfies the node; anything else makes it ask again."""

    async def run(self, ctx: GraphRunContext[Work, None]) -> Compute:
        ctx.state.requests += 1
        if granted("gpu") != self.satisfied_by:
            raise CapabilityRequired("gpu", {"need": "one CUDA device"})
        ctx.state.device = granted("gpu")
        return Compute()


@dataclass
class Compute(BaseNode[Work, None, str]):
    async def run(self, ctx: GraphRunContext[Work, None]) -> Probe | End[str]:
        return End(f"ran on {ctx.state.device}")


def declare_work(lab: Lab, name: str = "work") -> LabGraph:
    g = lab.graph(name, state_type=Work, output_type=str)
    g.node(Probe)
    g.node(Compute)
    return g


WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate_worker.py")


def worker_command(db: str | os.PathLike[str], *args: str) -> list[str]:
    return [sys.executable, WORKER, os.fspath(db), *args]


@dataclass
class Hop(BaseNode[Work, None, str]):
    """Needs the gpu at every hop: each hop is one capability resume."""

    left: int = 10

    async def run(self, ctx: GraphRunContext[Work, None]) -> Hop | End[str]:
        if granted("gpu") is None:
            raise CapabilityRequired("gpu")
        return Hop(left=self.left - 1) if self.left else End("done")


def declare_hops(lab: Lab, name: str = "hops") -> LabGraph:
    g = lab.graph(name, state_type=Work, output_type=str)
    g.node(Hop)
    return g
