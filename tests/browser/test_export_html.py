"""An exported run opened from file:// in Chromium: no JupyterLab, no kernel, no network.

Scenarios: scrub the timeline to a checkpoint and read the state, diff and lit station shown;
nothing but the file itself is requested; a state holding `<script>`, `</script>` and an
`<img onerror>` shows as text and runs nothing; a comparison page of a run and its fork shows both
paths and the first differing station. Screenshots go to SCREENSHOTS (export-run.png, export-compare.png).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest

from lab import Lab
from tests.conftest import Counter, Inc, declare_counter

from .conftest import CHROMIUM, CHROMIUM_ARGS, SCREENSHOTS, _require_chromium

HOSTILE = ["<script>window.PWNED=1</script>", "</script><img src=x onerror=\"window.PWNED=2\">"]


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def offline_page(chromium):  # type: ignore[no-untyped-def]
    """A page that records every request and dialog, and aborts anything not file://."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1400}, device_scale_factor=1)
    pg = context.new_page()
    pg.requests, pg.dialogs, pg.errors = [], [], []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://") else route.abort())
    try:
        yield pg
    finally:
        context.close()


@pytest.fixture
def runs(tmp_path) -> Iterator[tuple[Lab, object, object]]:
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    g = declare_counter(lab, "counter")
    run = g.start(Inc(), state=Counter(seen=list(HOSTILE)))
    run.run()
    fork = run.fork(2, state=Counter(count=3, seen=["edited"]))
    fork.run()
    yield lab, run, fork
    lab.close()


def _open(pg, path) -> None:  # type: ignore[no-untyped-def]
    pg.goto(path.as_uri())
    pg.wait_for_selector("html[data-gl-ready='1']")


def test_scrub_an_exported_run_offline(runs, offline_page, tmp_path) -> None:
    lab, run, _ = runs
    path = run.export_html(tmp_path / "run.html")
    pg = offline_page
    _open(pg, path)
    history = list(run.history())
    section = pg.locator("section.gl-run").first
    label = section.locator(".gl-label")
    assert label.get_attribute("data-seq") == str(history[-1].seq)  # opens at the head

    section.locator("input.gl-scrub").fill("3")  # the fourth checkpoint of the branch
    picked = history[3]
    assert label.get_attribute("data-seq") == str(picked.seq)
    state_text = section.locator(".gl-state").inner_text()
    assert f"count: {picked.state['count']}" in state_text
    for value in HOSTILE:  # shown as text (a JSON string), never as markup
        assert json.dumps(value) in state_text
    assert "Changes from checkpoint" in section.locator(".gl-diff").inner_text()
    lit = section.locator(".gl-drawing g.gl-current")
    assert lit.get_attribute("data-station") == picked.next[0].node_id

    section.locator("button.gl-prev").click()
    assert label.get_attribute("data-seq") == str(history[2].seq)
    section.locator("input.gl-events-all").check()
    assert "settled" in section.locator(".gl-events").inner_text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SCREENSHOTS / "export-run.png"), full_page=True)

    assert pg.evaluate("typeof window.PWNED") == "undefined"
    assert pg.dialogs == [] and pg.errors == []
    assert pg.locator("img").count() == 0
    assert pg.requests == [path.as_uri()]  # nothing fetched but the file itself


def test_exported_comparison_offline(runs, offline_page, tmp_path) -> None:
    lab, run, fork = runs
    path = lab.export_html([run, fork], tmp_path / "cmp.html")
    pg = offline_page
    _open(pg, path)
    cmp = pg.locator("section.gl-compare")
    text = cmp.inner_text()
    assert "diverge at position" in text and "First differing station" in text
    assert cmp.locator("g.gl-side-b").count() >= 1 and cmp.locator("g.gl-diverged").count() == 1
    assert pg.locator("section.gl-run").count() == 2
    pg.locator("section.gl-run").nth(1).locator("input.gl-scrub").fill("0")
    assert "edited" in pg.locator("section.gl-run").nth(1).locator(".gl-state").inner_text()
    pg.screenshot(path=str(SCREENSHOTS / "export-compare.png"), full_page=True)
    assert pg.evaluate("typeof window.PWNED") == "undefined"
    assert pg.dialogs == [] and pg.errors == []
    assert pg.requests == [path.as_uri()]
