"""A recorded call whose request holds a set replays in another process (issue 28 part 1).

A set of strings iterates in an order its process's string hashing picks (`PYTHONHASHSEED`, random
per process), and pydantic-core writes a set in that order: the same request digested otherwise
after a kernel restart, so a fork in the new process called again instead of replaying (and a
strict one failed). Both processes here are real interpreters with other hash seeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_serializer
from pydantic_core import to_json

from lab.agents.recorded_json import Serializers
from lab.recording import encode, sets_sorted

REPO = Path(__file__).resolve().parents[2]


@dataclass
class _Params:
    names: set[str]
    mode: str = "text"

SCRIPT = """
import json, sys
from dataclasses import dataclass, field
sys.path.insert(0, sys.argv[1])
from pydantic import BaseModel, Field
from pydantic_graph import BaseNode, End, GraphRunContext
from lab import Lab

@dataclass
class Tags:
    found: list[int] = field(default_factory=list)

@dataclass
class Where:
    places: frozenset[str]

class Query(BaseModel):
    words: set[str] = Field(alias="Words")
    where: Where

lab = Lab(sys.argv[2])
hits = []

@lab.recorded
def search(tags: set[str], *, also: frozenset[str] = frozenset()) -> int:
    hits.append(1)
    return len(tags) + len(also)

@lab.recorded
def find(query: Query) -> int:
    hits.append(1)
    return len(query.words)

g = lab.graph("tags", state_type=Tags, output_type=int)

@g.node
@dataclass
class Look(BaseNode[Tags, None, int]):
    async def run(self, ctx: GraphRunContext[Tags]) -> End[int]:
        ctx.state.found.append(search({"kite", "wind", "string", "tail", "spool"}, also=frozenset({"red", "blue"})))
        ctx.state.found.append(find(Query(Words={"sky", "cloud", "rain", "hail"}, where=Where(frozenset({"hill", "sea", "dune"})))))
        return End(sum(ctx.state.found))

if len(sys.argv) < 4:
    run = g.start(Look(), state=Tags())
    run.run()
else:
    run = lab.resume(sys.argv[3]).fork(0)
    run.replay = "strict"
    run.run()
print(json.dumps({"run": run.id, "status": run.status, "hits": len(hits), "modes": [c.mode for c in run.calls()]}))
lab.close()
"""


def _run(store: Path, seed: str, run_id: str | None) -> dict:
    script = store.parent / "tags.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(REPO), str(store), *([run_id] if run_id else [])], env={**os.environ, "PYTHONHASHSEED": seed},
        capture_output=True, text=True, timeout=300, cwd=str(REPO),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_strict_fork_in_another_process_replays_calls_whose_arguments_hold_sets(tmp_path: Path) -> None:
    store = tmp_path / "lab.duckdb"
    first = _run(store, "1", None)
    assert (first["status"], first["hits"], first["modes"]) == ("done", 2, ["live", "live"])
    for seed in ("2", "3"):
        fork = _run(store, seed, first["run"])
        assert (fork["status"], fork["hits"], fork["modes"]) == ("done", 0, ["replayed", "replayed"]), fork


def test_sets_sorted_orders_sets_and_keeps_everything_else() -> None:
    """Sets of two or more items become sorted lists at any depth of dicts, lists and tuples; a value
    without one is the same object (nothing copied); a set of none or one item is left as it is, so
    it writes what it always wrote; items that do not compare are ordered by their JSON text."""
    plain = {"a": [1, (2, 3)], "b": "x", "c": {"one"}, "d": set()}
    assert sets_sorted(plain) is plain
    assert sets_sorted({"t": ({"b", "a"}, [frozenset({"z", "y"})])}) == {"t": (["a", "b"], [["y", "z"]])}
    assert sets_sorted({1, "a"}) == ["a", 1]  # by their JSON text: `"a"` (a quote) before `1`
    assert Serializers().parameters(_Params(names={"b", "a"})) == b'{"names":["a","b"],"mode":"text"}'



@dataclass
class _Place:
    names: frozenset[str]
    size: int = 1


class _Ask(BaseModel):
    model_config = ConfigDict(ser_json_timedelta="float")
    tags: set[str] = Field(alias="Tags")
    rank: int = 1
    wait: timedelta = timedelta(seconds=3)
    place: _Place | None = None
    note: str = Field("hidden", exclude=True)

    @field_serializer("rank")
    def _rank(self, v: int) -> int:
        return v * 10


def test_a_set_inside_a_model_or_dataclass_is_sorted_and_the_rest_written_as_pydantic_writes_it() -> None:
    """A model or dataclass holding a set of two or more items writes what `to_json` writes for it (aliases,
    field serializers, JSON settings, excluded fields) but with the set sorted; one without such a set is the
    same object, so it writes what it always wrote."""
    ask = _Ask(Tags={"b", "c", "a"}, rank=2, place=_Place(frozenset({"y", "x"})))
    assert encode(sets_sorted(ask)) == (
        b'{"Tags":["a","b","c"],"rank":20,"wait":3.0,"place":{"names":["x","y"],"size":1}}'
    )
    assert encode(sets_sorted({"q": [_Place(frozenset({"n", "m"}), 2)]})) == b'{"q":[{"names":["m","n"],"size":2}]}'
    single = _Ask(Tags={"a"}, place=_Place(frozenset({"x"})))
    assert sets_sorted(single) is single
    assert encode(sets_sorted(single)) == to_json(single)
    plain_place = _Place(frozenset())
    assert sets_sorted([plain_place])[0] is plain_place
