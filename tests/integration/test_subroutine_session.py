"""Seed 000 "State": where a child call runs, and the provider conversation resource's lifetime.

Real runs on a DuckDB file; the resource is a live object (it holds a lock, so it could never be
checkpointed) whose open and close are logged.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab import Lab
from lab.subroutine import Subroutine, Success
from lab.subroutine.errors import SubroutineError
from tests.integration.subroutine_flows import Files, inprocess_parent, slow_child, workflow_parent

SHARED: dict[str, object] = {}
"""Module state of this process: a child in the parent's process sees what the parent put here."""


@pytest.fixture
def lab(tmp_path: Path):
    with Lab(tmp_path / "lab.duckdb") as lab:
        yield lab


def test_a_subroutine_call_shares_the_parent_process(lab: Lab, tmp_path: Path) -> None:
    """Seed 000: "A Subroutine call shares the parent process; a Workflow call uses a separate process."
    The adapter and both child visits of a Subroutine call log this test's pid, the child is a run in the
    parent's own store, and it is handed the parent's live deps object itself (not a copy); the same
    parent shape with a Workflow call logs another pid for the child's visits."""
    log = tmp_path / "in.log"
    deps = {"lock": threading.Lock()}  # live: nothing could carry it to another process
    run = lab.subroutine(inprocess_parent).start(3, params=Files(log=str(log)), deps=deps).run()
    assert run.status == "done" and run.output == 40, run.error
    pids = {line.split()[0]: line.split()[1] for line in log.read_text().splitlines() if len(line.split()) == 2}
    assert pids == {"adapter": str(os.getpid()), "first": str(os.getpid()), "second-start": str(os.getpid())}
    (call,) = [e.payload for e in run.events("call")]
    assert call["call"] == "subroutine"
    child = lab.resume(call["child_run"])
    assert child.status == "done" and child.deps is deps  # the parent's deps, the same object
    assert lab.run(call["child_run"]).graph_key == "slow_child"  # in the parent's store

    out_log = tmp_path / "out.log"
    other = lab.subroutine(workflow_parent).start(3, params=Files(log=str(out_log))).run()
    assert other.status == "done", other.error
    pids = {line.split()[0]: line.split()[1] for line in out_log.read_text().splitlines() if len(line.split()) == 2}
    assert pids["adapter"] == str(os.getpid()) and pids["first"] != str(os.getpid())


class Conversation:
    """A provider conversation: live (a lock, an open socket's stand-in), logged when opened and closed."""

    def __init__(self, log: list[str], name: str):
        self.lock = threading.Lock()
        self.log, self.name = log, name
        self.turns: list[str] = []
        log.append(f"open {name}")

    def close(self) -> None:
        self.log.append(f"close {self.name} after {len(self.turns)} turns")


@dataclass(frozen=True, slots=True)
class Seen:
    ids: tuple[int, ...] = ()


@dataclass
class Talk:
    who: str = "main"


def declare_talk(lab: Lab, log: list[str]):
    child = lab.subroutine("side_talk", input=str, output=str, params=Talk)
    child.session(lambda params: Conversation(log, params.who))

    @child.node(state=Seen)
    async def reply(text: str, state: Seen, context) -> Success:
        context.session.turns.append(text)
        log.append(f"child visit {context.session.name}")
        return Success(output=text.upper(), state=Seen(state.ids + (id(context.session),)))

    child.edge(child.input, reply)
    child.edge(reply, child.output)

    sub = lab.subroutine("talk", input=str, output=str, params=Talk)

    @sub.session
    def open_conversation(params: Talk) -> Conversation:
        return Conversation(log, params.who)

    @sub.node(state=Seen)
    async def ask(text: str, state: Seen, context) -> Success:
        context.session.turns.append(text)
        log.append(f"ask {context.session.name}")
        side = await context.invoke(Subroutine(child), text, params=Talk(who="side"))
        return Success(output=f"{text}/{side}", state=Seen(state.ids + (id(context.session),)))

    @sub.node(state=Seen, gate=True)
    async def approve(text: str, state: Seen, context) -> Success:
        verdict = context.consent("Send it?")
        context.session.turns.append("approved" if verdict.approved else "denied")
        log.append(f"approve {context.session.name}")
        return Success(output=f"{text}!", state=Seen(state.ids + (id(context.session),)))

    sub.edge(sub.input, ask)
    sub.edge(ask, approve)
    sub.edge(approve, sub.output)
    return sub


def test_the_provider_conversation_lives_one_invocation_and_is_never_checkpointed(lab: Lab) -> None:
    """Seed 000: "Provider conversation state has a separate lifetime, determined by the selected session
    resource." The resource is created at the invocation's entry (before its first visit), the same
    object in every visit of the invocation (across a consent park), closed at its exit (after the
    visit that routes to Output returns), never in a checkpoint; a child invocation
    (a Subroutine call) has its own, opened and closed inside the parent's visit."""
    log: list[str] = []
    sub = declare_talk(lab, log)
    run = sub.start("hi", params=Talk(who="main"))
    assert log == []  # nothing before the invocation's entry
    run.run()
    assert run.status == "waiting" and run.wait.kind == "consent"
    assert log == ["open main", "ask main", "open side", "child visit side", "close side after 1 turns"]
    run.approve()
    run.run()
    assert run.status == "done" and run.output == "hi/HI!"
    assert log[5:] == ["approve main", "close main after 2 turns"]  # turns: "hi", then the verdict
    ids = {i for seen in run.state.nodes.values() for i in seen.ids}
    assert len(ids) == 1  # ask and approve (run again after the park) saw the same resource
    for cp in run.history():
        text = json.dumps(cp.state)
        assert "Conversation" not in text and "lock" not in text and set(cp.state) == {"params", "nodes", "features"}


def test_a_visit_of_a_subroutine_without_a_session_resource_is_told_how_to_declare_one(lab: Lab) -> None:
    """Seed 000: the resource is "determined by the selected session resource": without one declared,
    `context.session` names `sub.session(factory)`."""
    sub = lab.subroutine("mute", input=str, output=str)

    @sub.node
    async def say(text: str, state, context) -> Success:
        return Success(output=str(context.session), state=state)

    sub.edge(sub.input, say)
    sub.edge(say, sub.output)
    run = sub.start("x").run(raise_on_failure=False)
    assert run.status == "failed" and "sub.session(factory)" in run.error["message"]
    with pytest.raises(SubroutineError, match="factory"):
        sub.session("not callable")
    assert slow_child.session_factory is None
