"""The benchmarks are one package, `lab.bench` (issue 26): each command starts as documented."""

from __future__ import annotations

import subprocess
import sys

import pytest

COMMANDS = {
    "lab.bench": ["--visits", "--repeat", "--warmup", "--only", "--profile", "--postgres", "--ray", "--replay"],
    "lab.bench.history": ["--checkpoints", "--samples"],
    "lab.bench.render": ["--stations", "--steps", "--layouts", "--width"],
    "lab.bench.agents": ["--repeat", "--warmup", "--subprocess-repeat"],
    "lab.bench.subroutine": ["--visits", "--runs", "--workflow"],
    "lab.bench.workflow": ["--loops", "--runs"],
    "lab.bench.share": ["--checkpoints", "--repeat", "--parallel-rounds"],
    "lab.bench.replay": ["--visits", "--repeat", "--warmup"],
    "lab.bench.evaluate": ["--cases", "--stations", "--no-ray"],
    "lab.bench.disk": ["--dir", "--records", "--rounds"],
}


@pytest.mark.slow
@pytest.mark.parametrize("module", list(COMMANDS))
def test_command_offers_its_documented_flags(module):
    """issue 26: `python -m <module> --help` works from the package and lists every flag docs/benchmarks.md uses."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"usage: python -m {module}" in done.stdout
    for flag in COMMANDS[module]:
        assert flag in done.stdout, (module, flag)

