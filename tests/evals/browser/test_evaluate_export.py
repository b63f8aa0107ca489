"""An evaluation, and two compared, as one HTML file (issue 29: the table and the plot "in the HTML
export too"): opened from `file://` in Debian's Chromium it shows the table and the SVG plot, asks
for nothing over the network and runs nothing, even with a case named like a script."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected

from lab import ArgumentError, Lab
from tests.browser.conftest import SCREENSHOTS

from ..test_evaluate import Ask, Closeness, declare

HOSTILE = "<script>window.PWNED=1</script>"


@pytest.fixture
def lab(tmp_path: Path):
    lab = Lab(str(tmp_path / "lab.duckdb"))
    yield lab
    lab.close()


def _dataset() -> Dataset:
    cases = [
        Case(name="hi", inputs=Ask(" hi "), expected_output="hi"),
        Case(name=HOSTILE, inputs=Ask("hello"), expected_output="hello"),
        Case(name="longer", inputs=Ask("good morning"), expected_output="good morning"),
    ]
    return Dataset(name="export", cases=cases, evaluators=[EqualsExpected()])


def test_an_evaluation_and_a_comparison_export_as_one_file(lab: Lab, tmp_path: Path, chromium) -> None:  # type: ignore[no-untyped-def]
    g, Clean = declare(lab)
    first = lab.evaluate(g, _dataset(), evaluators=[Closeness()], entry=Clean(), progress=False)
    g2, Clean2 = declare(lab, shout_all=True)
    second = lab.evaluate(g2, _dataset(), evaluators=[Closeness()], entry=Clean2(), progress=False)
    one = first.export_html(tmp_path / "eval.html")
    both = lab.compare_evaluations(first, second).export_html(str(tmp_path / "cmp.html"))
    case = lab.export_html(first.open(0), tmp_path / "case.html")  # a case's run, as any run (docs/share.md)
    assert first.rows()[0].run_id in Path(case).read_text(encoding="utf-8")
    for path in (one, both):
        text = Path(path).read_text(encoding="utf-8")
        assert "Content-Security-Policy" in text and "<svg" in text and "<table>" in text
        assert HOSTILE not in text and "&lt;script&gt;window.PWNED=1&lt;/script&gt;" in text
        assert "<script" not in text.lower()
    context = chromium.new_context(viewport={"width": 1200, "height": 1400})
    page = context.new_page()
    requests, dialogs = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        for path, words in ((one, ["Averages", "closeness"]), (both, ["worse"])):
            page.goto(Path(path).resolve().as_uri())
            for word in words:
                assert page.get_by_text(word).first.is_visible(), word
            assert page.locator("svg").count() >= 1
            assert page.get_by_text(HOSTILE).first.is_visible()  # shown as text
            assert page.evaluate("() => window.PWNED") is None
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "evaluation-export.png"), full_page=True)
    finally:
        context.close()
    assert dialogs == [] and all(url.startswith("file://") for url in requests), requests


def test_a_bad_path_is_refused(lab: Lab, tmp_path: Path) -> None:
    g, Clean = declare(lab)
    ev = lab.evaluate(g, _dataset(), entry=Clean(), progress=False)
    with pytest.raises(ArgumentError, match="is a directory"):
        ev.export_html(tmp_path)
    with pytest.raises(ArgumentError, match="does not exist"):
        ev.export_html(tmp_path / "nowhere" / "eval.html")
    with pytest.raises(ArgumentError, match="file path"):
        ev.export_html(None)
