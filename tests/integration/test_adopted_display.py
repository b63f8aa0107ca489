"""Every display path over every checkpoint of the adopted corpus (issue 15 item 3).

An adopted graph's pending stations are `TaskInput`s, not `BaseNode`s; the displays once
assumed `BaseNode` and printed tracebacks on `run.checkpoint(1)` and `%lab rewind 1`. Here each
graph of tests/integration/native_graphs.py runs to its end, then for each checkpoint: the
decoded checkpoint (HTML and text), the history tables, the run card, the run widget scrubbed
to it, `%lab rewind SEQ` and `%lab history --all` in a real IPython shell.
"""

from __future__ import annotations

from typing import Any

import pytest

from kernel_ext.display import run_html
from lab import Lab
from lab.widgets import RunWidget
from tests.integration import native_graphs as ng
from tests.integration.test_adopt import SHAPES
from tests.unit.test_kernel_ext import get_ipython

CORPUS = {**SHAPES, "gated": (ng.gated, lambda: {"inputs": "  hello world "})}


@pytest.fixture
def shell() -> Any:
    ip = get_ipython()
    ip.run_line_magic("load_ext", "kernel_ext")
    html = ip.display_formatter.formatters["text/html"]
    enabled, html.enabled = html.enabled, True
    yield ip
    html.enabled = enabled
    ip.run_line_magic("unload_ext", "kernel_ext")


def _shown(ip: Any, obj: Any) -> dict[str, str]:
    data, _ = ip.display_formatter.format(obj)
    return data


@pytest.mark.parametrize("shape", sorted(CORPUS))
def test_every_checkpoint_of_an_adopted_graph_displays(shape: str, shell: Any) -> None:
    build, kwargs = CORPUS[shape]
    lab = Lab(":memory:")
    try:
        run = lab.adopt(build(), name=shape).start(**kwargs())
        run.run()
        if run.status == "waiting":  # the gated graph parks: answer it and go on
            run.approve(note="ok")
            run.run()
        assert run.status == "done", run.error
        seqs = list(run.history().seqs)
        assert len(seqs) > 2
        widget = RunWidget(run)
        for i, seq in enumerate(seqs):
            cp = run.checkpoint(seq)
            stations = cp.next_stations
            assert all(isinstance(s, str) for s in stations)
            shown = _shown(shell, cp)
            assert f"{run.id}@{seq}" in shown["text/html"] and f"{run.id}@{seq}" in shown["text/plain"]
            for s in stations:
                assert s in shown["text/html"]
            widget.slider.value = i
            assert "could not" not in widget.message.value, widget.message.value
            assert f'data-seq="{seq}"' in widget.timeline_label.value
        assert "checkpoints" in _shown(shell, run.history())["text/html"]
        assert run.id in run_html(run)
        for seq in seqs[1:3]:  # `%lab rewind SEQ` shows the checkpoint it moved to
            result = shell.run_cell(f"%lab rewind {seq}", cell_id=f"rewind-{shape}-{seq}")
            assert result.success, result.error_in_exec
            assert result.result.seq == seq and run.head == seq
            assert f"{run.id}@{seq}" in _shown(shell, result.result)["text/html"]
        everything = shell.run_cell("%lab history --all", cell_id=f"all-{shape}")
        assert everything.success and len(everything.result) == len(seqs)
        widget.refresh()
        assert "could not" not in widget.message.value, widget.message.value
    finally:
        lab.close()
