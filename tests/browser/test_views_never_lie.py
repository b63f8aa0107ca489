"""Views that never lie (issue 25), in a real JupyterLab driven by Chromium.

- consent.ipynb under Run All, then a double-click on Approve and a stray Enter on the focused
  button: one verdict is stored, the view says "Approved" once and no failure (item 1); at End
  the header and the timeline both say "next End" (item 4)
- workflow.ipynb under Run All closes its lab and opens another: the first view says the lab
  is closed and how to go on, and offers no live button (item 2; it used to read "‖ waiting"
  with active Deep review / Quick look / Skip, whose click said "StoreError: the store ... is
  closed")
"""

from __future__ import annotations

import re

from .conftest import SCREENSHOTS, Server
from .frontends import cell_index, open_notebook, output_of, outputs_text, run_all
from .waits import SHOWS


def test_a_double_click_on_approve_answers_once(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    open_notebook(page, jupyter_server, jupyter_server.notebook("consent.ipynb"), "jupyterlab")
    run_all(page)
    w = page.locator(".gl-run")
    status = w.locator(".gl-run-status")
    expect(status).to_have_attribute("data-status", "waiting", timeout=SHOWS)
    approve = w.locator(".gl-consent .gl-approve")
    expect(approve).to_be_enabled()
    approve.dblclick()
    page.keyboard.press("Enter")  # a stray Enter on the button that still has the focus
    expect(status).to_have_attribute("data-status", "done", timeout=SHOWS)
    # The SQL cell, run again, executes after the kernel handled every click before it.
    sql_at = cell_index("consent.ipynb", 'print(f"the run is {run.status}"')
    sql = page.locator(".jp-Notebook .jp-Cell").nth(sql_at)
    sql.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    expect(output_of(page, sql_at).first).to_contain_text("the run is done", timeout=SHOWS)
    # the query's table is the cell's second output: read once it shows (it can lag the print)
    expect(output_of(page, sql_at)).to_have_count(2)
    expect(output_of(page, sql_at).last).to_contain_text("approved")  # its header, whatever the rows
    rows = output_of(page, sql_at).last.inner_text()
    assert rows.count("true") == 1, f"one verdict is stored, not {rows.count('true')}:\n{rows}"
    message = w.locator(".gl-message")
    expect(message).to_contain_text("Approved")
    text = message.inner_text()
    assert text.count("Approved") == 1 and "failed" not in text and "Error" not in text, text
    assert w.locator(".gl-event-log").inner_text().count("approved") == 1
    # one vocabulary: the header's "next" is the timeline's
    expect(w.locator(".gl-status")).to_contain_text("next End")
    expect(w.locator(".gl-selected")).to_contain_text("next End")
    assert page.dialogs == []


def test_a_view_of_a_closed_lab_offers_nothing(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    open_notebook(page, jupyter_server, jupyter_server.notebook("workflow.ipynb"), "jupyterlab")
    run_all(page)
    w = page.locator(".gl-run")
    expect(w).to_have_count(1)
    message = w.locator(".gl-message")
    expect(message).to_contain_text("this lab is closed", timeout=SHOWS)
    expect(message).to_contain_text("reopen with Lab() and display the run again")
    expect(w.locator(".gl-run-status")).to_have_attribute("data-label", "lab closed")
    expect(w.locator(".gl-consent")).to_be_hidden()  # no Deep review / Quick look / Skip to click
    for cls in ("gl-step", "gl-run-all", "gl-cancel", "gl-fork"):
        expect(w.locator(f".{cls}")).to_be_disabled()
    expect(w.locator(".gl-step")).to_have_attribute("title", re.compile("the lab is closed"))
    assert "StoreError" not in outputs_text(page)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    w.screenshot(path=str(SCREENSHOTS / "closed-lab-view.png"))
