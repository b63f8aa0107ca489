"""`%lab export [PATH]`: the current run (or `--run ID`) written as one HTML file; wrong words are UsageErrors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from IPython.core.error import UsageError

from tests.unit.test_kernel_ext import COUNTER_CELLS, ip, lab_magic, run_cells  # noqa: F401  (ip: the fixture)


def _data(path: Any) -> dict[str, Any]:
    text = path.read_text()
    start = text.index('id="gl-data">') + len('id="gl-data">')
    return json.loads(text[start : text.index("</script>", start)])


def test_export_the_current_run(ip: Any, tmp_path: Any, capsys: Any, monkeypatch: Any) -> None:  # noqa: F811
    run_cells(ip, COUNTER_CELLS)
    run = lab_magic(ip, "start Inc(by=2), state=State(count=1)")
    lab_magic(ip, "run")
    target = tmp_path / "review.html"
    assert lab_magic(ip, f"export {target}") is None
    assert f"wrote {target}" in capsys.readouterr().out
    data = _data(target)
    assert data["runs"][0]["id"] == run.id
    assert [c["seq"] for c in data["runs"][0]["checkpoints"]] == list(run.history().seqs)

    other = lab_magic(ip, "fork 1")  # the fork is current now; --run exports the parent
    monkeypatch.chdir(tmp_path)
    lab_magic(ip, f"export --run {run.id}")
    assert _data(tmp_path / f"{run.id}.html")["runs"][0]["id"] == run.id  # default name: RUN_ID.html
    lab_magic(ip, "export")
    assert _data(tmp_path / f"{other.id}.html")["runs"][0]["parent_run"] == run.id


def test_export_refuses_bad_words(ip: Any, tmp_path: Any) -> None:  # noqa: F811
    run_cells(ip, COUNTER_CELLS)
    lab_magic(ip, "start Inc(by=2), state=State(count=1)")
    with pytest.raises(UsageError, match="export"):
        lab_magic(ip, "export a.html b.html")
    with pytest.raises(UsageError, match="does not exist"):
        lab_magic(ip, f"export {tmp_path / 'missing' / 'run.html'}")


def test_a_comparison_displays_as_the_compare_widget(ip: Any, capsys: Any) -> None:  # noqa: F811
    run_cells(ip, COUNTER_CELLS)
    run = lab_magic(ip, "start Inc(by=2), state=State(count=1)")
    lab_magic(ip, "run")
    fork = lab_magic(ip, "fork 1")
    lab_magic(ip, "run")
    shown = []
    from lab import display_hooks
    from lab.views import display_comparison

    display_hooks.register("compare.display", lambda cmp: (shown.append(cmp), display_comparison(cmp)))
    try:
        ip.user_ns.update(a=run, b=fork)
        result = ip.run_cell("cmp = lab.compare(a, b)\ncmp", cell_id="cmp")
        assert result.success, result.error_in_exec
    finally:
        display_hooks.register("compare.display", display_comparison)
        for name in ("a", "b", "cmp"):
            ip.user_ns.pop(name, None)
    assert [c.a.run.id for c in shown] == [run.id] and shown[0].b.run.id == fork.id
    assert "CompareView" in capsys.readouterr().out  # the widget, as a terminal shell shows one
