"""The snapshot codec: anything the declared types admit round-trips; anything else is refused.

Seed 001 "Checkpoint Ownership": node ids resolve only from the declared classes; unknown or
missing node fields and state that no longer validates fail explicitly, never a silent default.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, PrivateAttr, TypeAdapter
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import CheckpointError, CheckpointValueError
from lab.codec import SnapshotCodec, checked_dump
from lab.records import PendingStation


class Colour(Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Inner:
    name: str
    weights: list[float] = field(default_factory=list)


@dataclass
class RichState:
    count: int = 0
    label: str = ""
    tags: list[str] = field(default_factory=list)
    scores: dict[str, int] = field(default_factory=dict)
    maybe: int | None = None
    inner: Inner | None = None
    colour: Colour = Colour.RED
    mode: Literal["fast", "slow"] = "fast"
    when: datetime | None = None
    pair: tuple[int, str] = (0, "")


class ModelState(BaseModel):
    items: list[int] = []
    note: str | None = None


@dataclass
class Work(BaseNode[RichState, None, int]):
    step: int = 0
    words: list[str] = field(default_factory=list)
    inner: Inner | None = None

    async def run(self, ctx: GraphRunContext[RichState, None]) -> End[int]:
        return End(self.step)


@dataclass
class Bare(BaseNode[RichState, None, int]):
    async def run(self, ctx: GraphRunContext[RichState, None]) -> End[int]:
        return End(0)


text = st.text(max_size=20)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
inner = st.builds(Inner, name=text, weights=st.lists(floats, max_size=4))
when = st.datetimes(timezones=st.just(UTC)) | st.none()
rich_state = st.builds(
    RichState,
    count=st.integers(),
    label=text,
    tags=st.lists(text, max_size=5),
    scores=st.dictionaries(text, st.integers(), max_size=4),
    maybe=st.integers() | st.none(),
    inner=inner | st.none(),
    colour=st.sampled_from(Colour),
    mode=st.sampled_from(["fast", "slow"]),
    when=when,
    pair=st.tuples(st.integers(), text),
)
work = st.builds(Work, step=st.integers(), words=st.lists(text, max_size=4), inner=inner | st.none())

codec = SnapshotCodec(state_type=RichState, output_type=int, nodes={"Work": Work, "Bare": Bare})


@settings(max_examples=150, deadline=None)
@given(rich_state)
def test_any_state_round_trips_through_json(state):
    data = codec.encode_state(state)
    again = codec.decode_state(json.loads(json.dumps(data)))
    assert again == state


@settings(max_examples=150, deadline=None)
@given(work)
def test_any_node_round_trips_through_json(node):
    station = codec.encode_node(node)
    wire = json.loads(json.dumps(station.to_json()))
    again = codec.decode_node(PendingStation(wire["node_id"], wire["fields"]))
    assert type(again) is Work and again == node


@settings(max_examples=50, deadline=None)
@given(st.builds(ModelState, items=st.lists(st.integers(), max_size=5), note=text | st.none()))
def test_pydantic_model_state_round_trips(state):
    c = SnapshotCodec(state_type=ModelState, output_type=int, nodes={})
    assert c.decode_state(json.loads(json.dumps(c.encode_state(state)))) == state


def test_unknown_node_id_names_run_and_seq():
    with pytest.raises(CheckpointError, match=r"run r1 checkpoint 4: unknown node id 'Gone'"):
        codec.decode_node(PendingStation("Gone", {}), run_id="r1", seq=4)


def test_unknown_and_missing_fields_are_errors_not_defaults():
    with pytest.raises(CheckpointError, match=r"unknown field\(s\) \['extra'\]"):
        codec.decode_node(PendingStation("Work", {"step": 1, "words": [], "inner": None, "extra": 1}))
    with pytest.raises(CheckpointError, match=r"missing field\(s\) \['words'\]"):
        codec.decode_node(PendingStation("Work", {"step": 1, "inner": None}))
    with pytest.raises(CheckpointError, match="field 'step' does not validate"):
        codec.decode_node(PendingStation("Work", {"step": "many", "words": [], "inner": None}))


def test_state_that_no_longer_validates_is_a_checkpoint_error():
    with pytest.raises(CheckpointError, match=r"run r2 checkpoint 7: state no longer validates as RichState: count"):
        codec.decode_state({"count": "lots"}, run_id="r2", seq=7)


def test_output_codec():
    assert codec.decode_output(codec.encode_output(5)) == 5
    with pytest.raises(CheckpointError, match="output no longer validates"):
        codec.decode_output("five")


@dataclass
class LooseState:
    """Any and bare-dict fields: pydantic writes whatever they hold, so values are compared."""

    anything: Any = None
    table: dict = field(default_factory=dict)
    typed: dict[int, str] = field(default_factory=dict)
    pair: tuple[int, ...] = ()


loose = SnapshotCodec(state_type=LooseState, output_type=Any, nodes={})


@pytest.mark.parametrize(
    ("state", "field_name", "became"),
    [
        (LooseState(table={1: "a"}), "table", "{'1': 'a'}"),
        (LooseState(anything=(1, 2)), "anything", "[1, 2]"),
        (LooseState(anything={"k": {2: "b"}}), "anything.k", "{'2': 'b'}"),
        (LooseState(anything={3, 4}), "anything", "[3, 4]"),
        (LooseState(anything=Colour.RED), "anything", "'red'"),
    ],
)
def test_a_value_json_changes_is_refused_naming_the_field(state, field_name, became):
    with pytest.raises(CheckpointValueError, match=rf"state field '{re.escape(field_name)}' changes .* became {re.escape(became)}"):
        loose.encode_state(state)


def test_declared_types_keep_what_json_alone_would_change():
    state = LooseState(anything=[1, "x", None, {"k": [1.5]}], typed={1: "a"}, pair=(1, 2))
    assert loose.decode_state(json.loads(json.dumps(loose.encode_state(state)))) == state


def test_an_open_file_in_an_any_field_is_refused_and_not_read(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("one\ntwo\n")
    with path.open() as fh:
        with pytest.raises(CheckpointValueError, match=r"state field 'anything' holds TextIOWrapper .* nothing was read"):
            loose.encode_state(LooseState(anything=fh))
        assert fh.tell() == 0 and fh.readline() == "one\n"
    gen = (i for i in range(3))
    with pytest.raises(CheckpointValueError, match=r"state field 'table.g' holds generator"):
        loose.encode_state(LooseState(table={"g": gen}))
    assert next(gen) == 0


def test_values_the_declared_types_refuse_name_the_field():
    with pytest.raises(CheckpointValueError, match=r"state field 'count' does not validate .* got None"):
        codec.encode_state(RichState(count=None))  # type: ignore[arg-type]
    with pytest.raises(CheckpointValueError, match=r"state field 'inner.weights.1' does not validate .* got 'heavy'"):
        codec.encode_state(RichState(inner=Inner("x", [1.0, "heavy"])))  # type: ignore[list-item]
    with pytest.raises(CheckpointValueError, match=r"node Work field 'step' does not validate .* got 'x'"):
        codec.encode_node(Work(step="x"))  # type: ignore[arg-type]
    with pytest.raises(CheckpointValueError, match=r"End data does not validate as declared in int.* got 'x'"):
        codec.encode_output("x")
    with pytest.raises(CheckpointValueError, match=r"End data changes when written as JSON and read back: '5' became 5"):
        codec.encode_output("5")


# -- a state of plain scalar fields is checked once per type (issue 27: the step hot path) --


@dataclass
class FlatState:
    count: int = 0
    label: str = ""
    on: bool = False


class FlatModel(BaseModel):
    count: int = 0
    label: str = ""


@dataclass
class PostInitState:
    count: int = 0

    def __post_init__(self) -> None:
        self.count = abs(self.count)


class StrictModel(BaseModel):
    count: int = Field(default=0, ge=0)


class PrivateModel(BaseModel):
    count: int = 0
    _seen: int = PrivateAttr(default=0)


class Label(str):
    pass


def test_a_flat_state_is_known_flat_and_dumps_as_the_full_check_does():
    for tp, value in ((FlatState, FlatState(3, "é\n\"x", True)), (FlatModel, FlatModel(count=-2, label="a"))):
        flat = SnapshotCodec(state_type=tp, output_type=int, nodes={})
        assert flat.state_checked_per_type
        data = flat.encode_state(value)
        assert data == TypeAdapter(tp).dump_python(value, mode="json")
        assert list(data) == list(TypeAdapter(tp).dump_python(value, mode="json"))  # field order
        assert flat.decode_state(data) == value


def test_types_that_json_or_validation_may_change_take_the_full_check():
    for tp in (RichState, ModelState, LooseState, PostInitState, StrictModel, PrivateModel, Inner):
        assert not SnapshotCodec(state_type=tp, output_type=int, nodes={}).state_checked_per_type, tp


def test_a_flat_state_holding_another_type_gets_what_the_full_check_says():
    flat = SnapshotCodec(state_type=FlatState, output_type=int, nodes={})
    with pytest.raises(CheckpointValueError, match=r"state field 'count' does not validate .* got None"):
        flat.encode_state(FlatState(count=None))  # type: ignore[arg-type]
    gone = FlatState()
    del gone.label
    odd = [FlatState(count=True), FlatState(label=5), FlatState(count=1.5), FlatState(label=Label("x")), FlatState(on=1), gone]  # type: ignore[arg-type]
    for value in odd:
        try:
            expected: Any = checked_dump(TypeAdapter(FlatState), value, "state", FlatState, loose=False)
        except CheckpointValueError as exc:
            expected = str(exc)
        try:
            got: Any = flat.encode_state(value)
        except CheckpointValueError as exc:
            got = str(exc)
        assert got == expected, value
