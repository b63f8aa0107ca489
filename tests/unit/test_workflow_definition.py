"""Loading workflow definitions (seed 004 "The variable bag"; issue 19 requirement 1).

Scenarios: a complete definition loads (YAML file and dict alike); a definition with many
mistakes reports every one of them at once, each with its path (and, for YAML, its line); the
variable bag's schema (types, defaults, built-ins) is enforced on every write.
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.workflow.bag import BUILTINS, Bag, repo_facts, seed
from lab.workflow.definition import END, load
from lab.workflow.errors import BagError, WorkflowDefinitionError

GOOD: dict[str, Any] = {
    "name": "triage-flow",
    "variables": [
        {"name": "review_mode", "type": "string", "default": "standard"},
        {"name": "bug_count", "type": "number", "default": 0},
        {"name": "has_critical_bugs", "type": "boolean", "default": False},
        {"name": "files", "type": "array", "default": []},
        {"name": "meta", "type": "object"},
    ],
    "activities": [
        {
            "id": "triage",
            "variables": {"writes": ["review_mode"]},
            "steps": [{"id": "detect", "outputs": ["mode"]}, {"id": "scan", "when": "review_mode == 'deep'"}],
            "checkpoints": [
                {
                    "id": "depth",
                    "prompt": "How deep?",
                    "options": [
                        {"id": "deep", "label": "Deep", "effects": {"setVariable": {"review_mode": "deep"}}},
                        {"id": "stop", "effects": {"exit": "stopped"}},
                    ],
                }
            ],
            "exits": [{"id": "stopped", "when": "review_mode == 'none'"}, {"id": "next", "isDefault": True}],
        },
        {
            "id": "review",
            "variables": {"writes": ["bug_count", "has_critical_bugs"]},
            "exits": [
                {"id": "fix", "when": "has_critical_bugs && bug_count > 0"},
                {"id": "done", "isDefault": True},
            ],
        },
        {"id": "fix", "exits": [{"id": "again", "isDefault": True}]},
    ],
    "exit_destinations": {
        "triage": {"stopped": "end", "next": "review"},
        "review": {"fix": "fix", "done": "end"},
        "fix": {"again": "review"},
    },
}


def test_a_complete_definition_loads_from_a_dict_and_from_yaml(tmp_path: Path) -> None:
    """A workflow declares the facts a session starts with in workflow.yaml — name, type (string, number,
    boolean, array, object), and optionally a default — and each activity declares the variables it
    writes under variables.writes."""
    d = load(GOOD)
    path = tmp_path / "workflow.yaml"
    path.write_text(yaml.safe_dump(GOOD, sort_keys=False))
    f = load(path)
    assert d.digest == f.digest and f.source == str(path)
    assert list(f.activities) == ["triage", "review", "fix"] and f.initial == "triage"
    assert f.variables["bug_count"].type == "number" and f.variables["bug_count"].default == 0
    assert not f.variables["meta"].has_default
    assert f.activities["review"].writes == {"bug_count", "has_critical_bugs"}
    assert [e.id for e in f.activities["review"].exits] == ["fix", "done"]
    assert f.activities["review"].default_exit.id == "done"
    assert f.destination("review", "done") == END
    assert f.activities["triage"].checkpoints[0].option("stop").exit == "stopped"
    assert f.activities["triage"].checkpoints[0].option("stop").label == "stop"
    assert set(BUILTINS) <= set(f.variables)  # user_request and the repository facts


def broken() -> dict[str, Any]:
    d = copy.deepcopy(GOOD)
    d["variables"][1]["default"] = "zero"  # number with a string default
    d["variables"].append({"name": "review_mode", "type": "string"})  # twice
    d["variables"].append({"name": "x", "type": "integer"})  # no such type
    d["variables"].append({"name": "user_request", "type": "number"})  # a built-in with another type
    triage = d["activities"][0]
    triage["variables"]["writes"].append("nope")
    triage["checkpoints"][0]["options"][0]["effects"]["setVariable"]["bug_count"] = "many"
    triage["checkpoints"][0]["options"][1]["effects"]["exit"] = "elsewhere"
    triage["exits"][0]["when"] = "review_mode = 'none'"
    triage["exits"].append({"id": "second_default", "isDefault": True})
    triage["colour"] = "blue"
    review = d["activities"][1]
    review["exits"][0]["when"] = "has_critical_bugs && bug_total > 0"
    review["exits"].append({"id": "nowhen"})
    d["activities"].append({"id": "end"})
    d["exit_destinations"]["review"]["fix"] = "repair"
    d["exit_destinations"]["ghost"] = {"x": "end"}
    return d


EXPECTED = [
    ("variables[1].default", "expected a number, got the string 'zero'"),
    ("variables[5].name", "declared twice"),
    ("variables[6].type", "'integer' is not a type"),
    ("variables[7].type", "declare it as string"),
    ("activities[0].colour", "unknown key"),
    ("activities[0].variables.writes[1]", "'nope' is not a declared variable"),
    ("activities[0].exits[0].when", "a single '=' is not an operator (did you mean '=='?) at column 13"),
    ("activities[0].exits[2].isDefault", "one default exit"),
    ("activities[0].checkpoints[0].options[0].effects.setVariable.bug_count", "is a number"),
    ("activities[0].checkpoints[0].options[1].effects.exit", "'elsewhere' is not an exit of this activity"),
    ("activities[1].exits[0].when", "'bug_total' at column 22"),
    ("activities[1].exits[2]", "needs a `when` expression, or `isDefault: true`"),
    ("activities[3].id", "'end' is reserved"),
    ("exit_destinations.ghost", "'ghost' is not an activity"),
    ("exit_destinations.review.fix", "destination 'repair' is neither an activity nor 'end'"),
    ("exit_destinations.review.nowhen", "has no destination"),
    ("exit_destinations.triage.second_default", "has no destination"),
]


def _assert_reports_every_problem(err: WorkflowDefinitionError, with_lines: bool) -> None:
    found = {p.path.split(" (line")[0]: p for p in err.problems}
    for path, fragment in EXPECTED:
        assert path in found, f"no problem reported at {path}; got {[str(p) for p in err.problems]}"
        assert fragment in found[path].message, (path, found[path].message)
        if with_lines:
            assert " (line " in found[path].path, found[path]
    assert len(err.problems) == len(EXPECTED), [str(p) for p in err.problems]
    text = str(err)
    assert f"has {len(EXPECTED)} problems" in text
    assert all(path in text for path, _ in EXPECTED)


def test_every_problem_is_reported_with_its_path() -> None:
    """Loading validates it and reports every problem with its path in the file (issue 19, requirement 1)."""
    with pytest.raises(WorkflowDefinitionError) as info:
        load(broken())
    _assert_reports_every_problem(info.value, with_lines=False)


def test_a_yaml_file_reports_each_problem_with_its_line(tmp_path: Path) -> None:
    """Loading validates it and reports every problem with its path in the file, and the line."""
    path = tmp_path / "workflow.yaml"
    path.write_text(yaml.safe_dump(broken(), sort_keys=False))
    with pytest.raises(WorkflowDefinitionError) as info:
        load(path)
    _assert_reports_every_problem(info.value, with_lines=True)
    lines = path.read_text().splitlines()
    colour = next(p for p in info.value.problems if p.path.startswith("activities[0].colour"))
    line = int(colour.path.split("(line ")[1].rstrip(")"))
    assert "colour" in lines[line - 1]


def test_unreadable_and_invalid_yaml_are_reported(tmp_path: Path) -> None:
    with pytest.raises(WorkflowDefinitionError, match="cannot read the file"):
        load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nactivities: [\n  - id: a\n")
    with pytest.raises(WorkflowDefinitionError, match=r"line \d+, column \d+: not valid YAML"):
        load(bad)
    with pytest.raises(WorkflowDefinitionError, match=r"\(top level\): expected a mapping"):
        load([])  # type: ignore[arg-type]


def test_a_definition_needs_a_name_and_activities() -> None:
    with pytest.raises(WorkflowDefinitionError) as info:
        load({"activities": []})
    paths = {p.path for p in info.value.problems}
    assert {"name", "activities"} <= paths


# -- the bag -----------------------------------------------------------------------------------


def test_the_bag_is_seeded_from_declarations_request_and_repository_facts(tmp_path: Path) -> None:
    """The session's state dictionary is seeded from these declarations when the session opens, together
    with user_request when one is passed and, from a working directory, the repository facts
    host_repo_path, target_repo, component_path and is_monorepo."""
    repo = tmp_path / "shop"
    (repo / "services" / "api").mkdir(parents=True)
    (repo / "services" / "web").mkdir(parents=True)
    (repo / "services" / "api" / "pyproject.toml").write_text("")
    (repo / "services" / "web" / "package.json").write_text("{}")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    facts = repo_facts(repo / "services" / "api")
    assert facts == {
        "host_repo_path": str(repo.resolve()),
        "target_repo": "shop",
        "component_path": "services/api",
        "is_monorepo": True,
    }
    d = load(GOOD)
    bag = seed(d.variables, user_request="fix the login bug", repo=facts)
    assert bag == {
        "review_mode": "standard",
        "bug_count": 0,
        "has_critical_bugs": False,
        "files": [],
        "user_request": "fix the login bug",
        **facts,
    }
    assert "meta" not in bag  # declared without a default: absent until written
    assert seed(d.variables) == {
        "review_mode": "standard",
        "bug_count": 0,
        "has_critical_bugs": False,
        "files": [],
    }
    single = tmp_path / "single"
    single.mkdir()
    assert repo_facts(single)["is_monorepo"] is False and repo_facts(single)["component_path"] == ""


@pytest.mark.parametrize(
    ("updates", "fragment"),
    [
        ({"bug_count": "3"}, "'bug_count': expected a number, got the string '3'"),
        ({"bug_count": True}, "expected a number, got the boolean true"),
        ({"has_critical_bugs": 1}, "expected a boolean, got the number 1"),
        ({"files": {}}, "expected a array, got an object"),
        ({"meta": []}, "expected a object, got an array"),
        ({"review_mode": None}, "expected a string, got null"),
        ({"ghost": 1}, "'ghost' is not a declared variable"),
    ],
)
def test_every_write_is_schema_validated(updates: dict[str, Any], fragment: str) -> None:
    """A schema-validated variable bag holds the state."""
    d = load(GOOD)
    bag = Bag(d.variables, seed(d.variables))
    before = dict(bag.values)
    with pytest.raises(BagError) as info:
        bag.write({"review_mode": "deep", **updates}, by="the test")
    assert fragment in str(info.value) and "the test wrote" in str(info.value)
    assert bag.values == before  # all or nothing


def test_a_worker_writes_only_the_variables_its_activity_declares() -> None:
    """Each activity declares the variables it writes under variables.writes."""
    d = load(GOOD)
    bag = Bag(d.variables, seed(d.variables))
    with pytest.raises(BagError, match="not among the variables this activity writes"):
        bag.write({"review_mode": "deep"}, by="review's worker", allowed=d.activities["review"].writes)
    bag.write({"bug_count": 2}, by="review's worker", allowed=d.activities["review"].writes)
    assert bag.get("bug_count") == 2


def test_repo_facts_need_a_directory(tmp_path: Path) -> None:
    with pytest.raises(BagError, match="is not a directory"):
        repo_facts(tmp_path / "nope")
