"""The evaluation tests need the `evals` extra (pydantic-evals, matplotlib), which pins pydantic-ai-slim
and pydantic-graph to pydantic-evals' own version: scripts/test.sh runs this folder in `.venv-evals`
(docs/evaluate.md "Versions"). Under CI=true a missing pydantic-evals is a failure, never a skip."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import matplotlib  # noqa: F401
        import pydantic_evals  # noqa: F401
    except ImportError as exc:
        where = "run tests/evals with .venv-evals/bin/python (scripts/setup.sh makes it)"
        if os.environ.get("CI") == "true":
            raise pytest.UsageError(f"pydantic-evals is required under CI=true: {exc}; {where}") from None
        skip = pytest.mark.skip(reason=f"the evals extra is not installed here ({exc}); {where}")
        for item in items:
            if "tests/evals/" in item.nodeid.replace("\\", "/"):
                item.add_marker(skip)
