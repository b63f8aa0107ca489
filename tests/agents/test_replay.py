"""Recorded calls replayed on rewind, fork and retry (issue 28 part 1, docs/replay.md).

Scenarios, each on a real DuckDB file with pydantic-ai's `FunctionModel` counting its calls:
- a rewind re-runs stations from their recordings (0 model calls);
- `run.replay = "strict"`: a changed request raises `ReplayMissError` with the diff of the two;
  `"off"` calls for real;
- a station that failed after its model call replays that call on `run.retry()`, and the agent gets
  the very `ModelResponse` it got live, byte for byte once dumped (its times included; the agent run's own ids aside);
- `@lab.recorded` functions (sync and async) replay their JSON result; outside a station they run;
- secrets (headers, API keys) never reach the store;
- `run.events("recorded")` marks each call live or replayed with the tokens saved;
- a delegated station's job replays its model requests in a fork.
The fork of a five-station run (0 calls, then exactly the changed one) runs on both stores in
tests/store/test_call_conformance.py; across a kernel restart in test_replay_restart.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.function import FunctionModel
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab
from lab.errors import ArgumentError, NodeExecutionError, ReplayMissError
from tests.agents.graphs import declare as declare_delegated
from tests.agents.replay_graphs import Article, CountingModel, declare


@pytest.fixture
def rlab(tmp_path: Path):
    with Lab(tmp_path / "lab.duckdb") as lab:
        yield lab


def test_a_rewind_replays_the_recorded_responses_exactly(rlab: Lab) -> None:
    g, model, _ = declare(rlab)
    run = g.start(g.nodes["Research"](), state=Article())
    run.run()
    first = run.state
    live = run.calls()
    assert model.calls == 5 and [c.mode for c in live] == ["live"] * 5
    assert [c.node_id for c in live] == ["Research", "Outline", "Draft", "Review", "Polish"]
    assert all(c.attempt is not None and c.call_index == 1 and c.tokens > 0 for c in live)
    run.rewind(1)
    run.run()
    assert model.calls == 5 and run.state == first
    assert [c.mode for c in run.calls()][5:] == ["replayed"] * 4
    replayed = next(c for c in run.calls()[5:] if c.node_id == "Draft")
    assert replayed.replayed_from == live[2].call_id and replayed.response is None


def test_events_mark_each_call_live_or_replayed_with_the_tokens_saved(rlab: Lab) -> None:
    g, _, _ = declare(rlab)
    run = g.start(g.nodes["Research"](), state=Article())
    run.run()
    fork = run.fork(3)
    fork.run()
    live = [e.payload for e in run.events("recorded")]
    again = [e.payload for e in fork.events("recorded")]
    assert [p["mode"] for p in live] == ["live"] * 5 and all(p["saved_tokens"] == 0 for p in live)
    assert [p["mode"] for p in again] == ["replayed"] * 2
    assert all(p["saved_tokens"] == p["tokens"] > 0 for p in again)
    kinds = [e.kind for e in fork.events()]
    assert kinds.index("recorded") > kinds.index("entered")  # inside the station's try


def test_strict_names_what_changed_and_off_calls_for_real(rlab: Lab) -> None:
    g, model, _ = declare(rlab)
    run = g.start(g.nodes["Research"](), state=Article())
    run.run()
    strict = run.fork(2, state=Article(tone="stern", notes=run.state_at(2).notes))
    strict.replay = "strict"
    with pytest.raises(NodeExecutionError) as failed:
        strict.run(raise_on_failure=True)
    err = failed.value.__cause__
    assert isinstance(err, ReplayMissError) and "ReplayMissError" in str(failed.value)
    msg = str(err)
    assert "station 'Review'" in msg and "replay='strict'" in msg and "run.replay = 'auto'" in msg
    assert '-     "content": "Review the draft in a plain tone"' in err.diff
    assert '+     "content": "Review the draft in a stern tone"' in err.diff
    assert strict.error is not None and strict.error["type"].endswith("ReplayMissError")
    assert model.calls == 5 and strict.status == "failed"  # Draft replayed, Review refused before calling
    off = run.fork(2)
    off.replay = "off"
    off.run()
    assert model.calls == 8 and [c.mode for c in off.calls()] == ["live"] * 3
    with pytest.raises(ArgumentError, match="'auto', 'strict' or 'off'"):
        off.replay = "sometimes"


@dataclass
class Box:
    topic: str = "kites"
    got: list[str] = field(default_factory=list)


def test_a_retry_replays_the_call_made_before_the_failure(rlab: Lab) -> None:
    model = CountingModel()
    parser = {"broken": True}
    responses: list[bytes] = []
    agent = rlab.recorded(Agent(FunctionModel(model)))
    g = rlab.graph("flaky", state_type=Box, output_type=int)

    @g.node
    @dataclass
    class Ask(BaseNode[Box, None, int]):
        async def run(self, ctx: GraphRunContext[Box]) -> End[int]:
            result = await agent.run(f"about {ctx.state.topic}")
            # pydantic-ai stamps the response with its own agent run's ids after the model answers
            stamped = replace(result.response, run_id=None, conversation_id=None)
            responses.append(ModelMessagesTypeAdapter.dump_json([stamped]))
            ctx.state.got.append(result.output)
            if parser["broken"]:
                raise RuntimeError("the parser choked")
            return End(len(ctx.state.got))

    run = g.start(Ask(), state=Box())
    run.run()
    assert run.status == "failed" and model.calls == 1
    parser["broken"] = False
    run.retry()
    assert run.status == "done" and model.calls == 1
    assert len(responses) == 2 and responses[0] == responses[1]  # byte for byte, times included  # the retry replayed the recorded answer
    modes = [c.mode for c in run.calls()]
    assert modes[0] == "live" and modes[1:] and set(modes[1:]) == {"replayed"}


SECRET = "sk-live-very-secret-0123456789"


def test_recorded_functions_replay_and_secrets_are_left_out(rlab: Lab) -> None:
    hits = {"fetch": 0, "lookup": 0}

    @rlab.recorded
    def fetch(url: str, *, api_key: str, headers: dict[str, str] | None = None) -> dict[str, int]:
        hits["fetch"] += 1
        return {"len": len(url), "n": hits["fetch"]}

    @rlab.recorded(name="lookup")
    async def lookup(word: str) -> list[str]:
        hits["lookup"] += 1
        return [word, word.upper()]

    model = CountingModel()
    agent = rlab.recorded(Agent(FunctionModel(model)))
    g = rlab.graph("tools", state_type=Box, output_type=int)

    @g.node
    @dataclass
    class Fetch(BaseNode[Box, None, int]):
        async def run(self, ctx: GraphRunContext[Box]) -> Think:
            page = fetch(f"https://x.test/{ctx.state.topic}", api_key=SECRET, headers={"Authorization": f"Bearer {SECRET}"})
            ctx.state.got += [json.dumps(page), *(await lookup(ctx.state.topic))]
            return Think()

    @g.node
    @dataclass
    class Think(BaseNode[Box, None, int]):
        async def run(self, ctx: GraphRunContext[Box]) -> End[int]:
            settings = {"extra_headers": {"Authorization": f"Bearer {SECRET}"}, "api_key": SECRET, "temperature": 0.5}
            ctx.state.got.append((await agent.run("think", model_settings=settings)).output)  # type: ignore[arg-type]
            return End(len(ctx.state.got))

    assert fetch("https://x.test/a", api_key=SECRET) == {"len": 16, "n": 1}  # outside a station: it just runs
    run = g.start(Fetch(), state=Box())
    run.run()
    assert run.status == "done" and hits == {"fetch": 2, "lookup": 1} and model.calls == 1
    fork = run.fork(0)
    fork.run()
    assert fork.state == run.state and hits == {"fetch": 2, "lookup": 1} and model.calls == 1
    assert [(c.kind, c.mode) for c in fork.calls()] == [("function", "replayed"), ("function", "replayed"), ("model", "replayed")]
    stored = rlab.sql("select request::VARCHAR, response::VARCHAR from calls").fetchall()
    text = json.dumps(stored)
    assert SECRET not in text and "Bearer" not in text and "api_key" not in text and "extra_headers" not in text
    think = next(c for c in run.calls() if c.kind == "model")
    assert think.request["settings"] == {"temperature": 0.5}  # what is not a secret stays
    fetch_req = next(c.request for c in run.calls() if c.name.endswith("fetch"))
    assert fetch_req == {"args": {"url": "https://x.test/kites"}}


def test_a_delegated_stations_job_replays_in_a_fork(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.agents.agent_defs import Plan, planner

    calls: list[int] = []
    plan = planner.model.function  # type: ignore[union-attr]
    counted = Agent(FunctionModel(lambda m, i: (calls.append(1), plan(m, i))[1]), output_type=Plan)

    @counted.tool_plain
    def lookup(topic: str) -> str:
        return f"notes on {topic}"

    with Lab(tmp_path / "lab.duckdb") as lab:
        lab.agents.register("counted", counted)
        g = declare_delegated(lab, runtime="counted")
        run = g.start(g.nodes["Outline"]())
        reads: list[str] = []
        with monkeypatch.context() as m:  # a read folds the journal: tens of ms a station (issue 27 item 4)
            real = type(lab.store).calls
            m.setattr(type(lab.store), "calls", lambda self, *a, **k: (reads.append("calls"), real(self, *a, **k))[1])
            run.run()
        assert reads == []  # the job ran here: its calls are surfaced from memory, not read back
        assert run.status == "done" and len(calls) == 2
        assert [(c.node_id, c.mode, c.call_index) for c in run.calls()] == [("Outline", "live", 1), ("Outline", "live", 2)]
        fork = run.fork(0)
        fork.run()
        assert fork.status == "done" and fork.output == run.output and len(calls) == 2
        assert [c.mode for c in fork.calls()] == ["replayed", "replayed"]
        for r, mode in ((run, "live"), (fork, "replayed")):  # once the outcome is taken in, the job's calls are events
            events = r.events("recorded")
            assert [(e.node_id, e.payload["mode"], e.payload["job"]) for e in events] == [("Outline", mode, True)] * 2
            assert [e.payload["call"] for e in events] == [c.call_id for c in r.calls()]
            assert all(e.payload["saved_tokens"] == (e.payload["tokens"] if mode == "replayed" else 0) for e in events)
            settled = r.events("settled")[0].seq
            assert all(e.seq < settled for e in events)  # written with the station's settlement
        strict = run.fork(0)
        strict.replay = "strict"  # the job's calls follow the run's mode
        strict.run()
        assert strict.status == "done" and len(calls) == 2
        from tests.agents.graphs import Essay

        changed = run.fork(0, state=Essay(topic="kites"))
        changed.replay = "strict"
        changed.run()
        assert changed.status == "failed" and len(calls) == 2  # refused before the model was called
        message = changed.error["message"]
        assert "replay='strict'" in message and '+     "content": "Outline an essay about kites' in message


def test_the_run_widget_marks_each_call_live_or_replayed(rlab: Lab) -> None:
    from lab.widgets.run_widget import RunWidget

    g, _, _ = declare(rlab)
    run = g.start(g.nodes["Research"](), state=Article())
    run.run()
    fork = run.fork(3)
    fork.run()
    live = RunWidget(run).events_panel.value
    again = RunWidget(fork).events_panel.value
    assert live.count("● live model function:CountingModel: #1 · ") == 5 and "replayed" not in live
    assert again.count("↺ replayed model function:CountingModel: #1 · ") == 2
    assert all(f"{c.tokens} tokens saved" in again for c in fork.calls())
    assert "gl-ev-recorded" in again


def test_a_request_is_serialized_once_as_the_documented_json(rlab: Lab) -> None:
    """The recorder writes a model request's JSON text in one pass (per-class pydantic serializers, times
    left out by `exclude`), secret-checks and digests that text and stores it as it is: it equals the
    JSON docs/replay.md describes, built the long way (the adapter's dump, volatile keys dropped), so a
    recording made before reads the same digest; the response is the adapter's dump, byte for byte."""
    import hashlib

    from pydantic_core import to_json, to_jsonable_python

    from lab.agents.recorded_model import SERIALIZERS, VOLATILE

    seen: list[tuple[list, object, object]] = []
    model = CountingModel()

    class Seeing(FunctionModel):
        async def request(self, messages, model_settings, parameters):  # type: ignore[override]
            seen.append((list(messages), model_settings, parameters))
            return await super().request(messages, model_settings, parameters)

    def tool(word: str, times: int = 2) -> str:
        """Repeat a word."""
        return word * times

    agent = rlab.recorded(Agent(Seeing(model), tools=[tool], instructions="Be brief \u2603"))
    g = rlab.graph("once", state_type=Box, output_type=int)

    @g.node
    @dataclass
    class Ask(BaseNode[Box, None, int]):
        async def run(self, ctx: GraphRunContext[Box]) -> End[int]:
            ctx.state.got.append((await agent.run("think é", model_settings={"temperature": 0.5})).output)
            return End(1)

    run = g.start(Ask(), state=Box())
    run.run()
    [call] = run.calls()
    messages, settings, parameters = seen[0]

    def steady(m: dict) -> dict:
        out = {k: v for k, v in m.items() if k not in VOLATILE}
        out["parts"] = [{k: v for k, v in p.items() if k not in VOLATILE} for p in out["parts"]]
        return out

    params = to_jsonable_python(parameters)
    documented = {
        "model": "function:CountingModel:", "system": "function",
        "messages": [steady(m) for m in ModelMessagesTypeAdapter.dump_python(messages, mode="json")],
        "settings": {"temperature": 0.5}, "parameters": {k: v for k, v in params.items() if not k.startswith("_")},
    }  # fmt: skip
    assert to_json(call.request) == to_json(documented) and call.request["parameters"]["function_tools"][0]["name"] == "tool"
    assert call.digest == hashlib.sha256(f"model\x00{call.name}\x00".encode() + to_json(documented)).hexdigest()
    response = ModelMessagesTypeAdapter.validate_python([call.response])[0]
    assert b"[" + SERIALIZERS.response(response) + b"]" == ModelMessagesTypeAdapter.dump_json([response])
