"""The workflow the workflow tests share (and the killed worker process runs)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from lab.workflow.compile import ActivityResult

FLOW: dict[str, Any] = {
    "name": "bugs",
    "variables": [
        {"name": "mode", "type": "string", "default": "standard"},
        {"name": "bug_count", "type": "number", "default": 0},
        {"name": "critical", "type": "boolean", "default": False},
        {"name": "notes", "type": "array", "default": []},
    ],
    "activities": [
        {
            "id": "triage",
            "variables": {"writes": ["mode"]},
            "checkpoints": [
                {
                    "id": "depth",
                    "prompt": "How deep should the review go?",
                    "options": [
                        {"id": "deep", "label": "Deep review", "effects": {"setVariable": {"mode": "deep"}}},
                        {"id": "quick", "label": "Quick look"},
                        {"id": "skip", "label": "Skip it", "effects": {"exit": "skipped"}},
                    ],
                }
            ],
            "exits": [{"id": "skipped", "when": "mode == 'none'"}, {"id": "review", "isDefault": True}],
        },
        {
            "id": "review",
            "variables": {"writes": ["bug_count", "critical", "notes"]},
            "steps": [
                {"id": "run_tests", "outputs": ["failed"]},
                {"id": "lint", "when": "mode == 'deep'", "outputs": ["issues"]},
                {"id": "per_file", "outputs": ["files"], "loop": [{"id": "check_file", "outputs": ["ok"]}]},
            ],
            "exits": [
                {"id": "urgent", "when": "critical && bug_count > 0"},
                {"id": "fix", "when": "bug_count > 0"},
                {"id": "done", "isDefault": True},
            ],
        },
        {"id": "urgent", "variables": {"writes": ["critical"]}, "exits": [{"id": "back", "isDefault": True}]},
        {"id": "fix", "variables": {"writes": ["bug_count"]}, "exits": [{"id": "back", "isDefault": True}]},
    ],
    "exit_destinations": {
        "triage": {"skipped": "end", "review": "review"},
        "review": {"urgent": "urgent", "fix": "fix", "done": "end"},
        "urgent": {"back": "review"},
        "fix": {"back": "review"},
    },
}

FULL_MANIFEST = [
    {"step_id": "run_tests", "output": {"failed": 0}},
    {"step_id": "per_file", "output": {"files": 1}},
]


def workers(found: list[tuple[int, bool]]) -> dict[str, Any]:
    """review reports the next (bug_count, critical) of `found`; fix and urgent clear them."""
    queue = list(found)

    def review(ctx):
        bugs, critical = queue.pop(0) if queue else (0, False)
        return ActivityResult({"bug_count": bugs, "critical": critical}, FULL_MANIFEST)

    return {
        "review": review,
        "fix": lambda ctx: {"variables": {"bug_count": 0}},
        "urgent": lambda ctx: {"variables": {"critical": False}},
    }


def killable_workers(in_fix: threading.Event) -> dict[str, Any]:
    """review finds one bug; fix signals `in_fix` and, with GRAPHLAB_TEST_BLOCK_FIX=1 set (the
    process to be killed), blocks until it is killed. The same source in both processes: the
    resuming one runs the same revision."""

    def fix(ctx):
        in_fix.set()
        while os.environ.get("GRAPHLAB_TEST_BLOCK_FIX") == "1":
            time.sleep(1)
        return {"variables": {"bug_count": 0}}

    return {**workers([(1, False)]), "fix": fix}
