"""A delegated station's tool approvals in the run view's consent panel, in a real JupyterLab driven by Chromium.

The notebook (written by the test) runs an agent (pydantic-ai on FunctionModel, in the kernel) that
asks to call a tool declared `requires_approval=True` in each of two model rounds. Scenario: Run
parks on round 1's consent wait, the panel names the call; Approve continues the agent, which parks
on round 2; a note and Deny continue it again, and the run reaches End with the approved call's
return and the person's note as the denied call's answer.
"""

from __future__ import annotations

import re

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from .conftest import REPO, SCREENSHOTS, Server
from .lab_page import open_in_lab
from .waits import KERNEL_UP, SHOWS

CELL = """import sys
sys.path.insert(0, {repo!r})
from lab import Lab
from tests.agents.agent_defs import asker
from tests.agents.graphs import declare_sending

lab = Lab()
lab.agents.register("asker", asker)
g = declare_sending(lab, "asker", rounds=2)
run = g.start(g.nodes["Outline"]())
run"""


def test_tool_approvals_answered_in_the_consent_panel(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    """Seed 001 "Consent re-entry": "One approval call per model round, with bounded chained rounds, is
    current." Each round's calls show in the consent panel; its Approve / Deny answer that round."""
    from playwright.sync_api import expect

    folder = jupyter_server.root / "approvals"
    folder.mkdir()
    nb = new_notebook(cells=[new_code_cell(CELL.format(repo=str(REPO)))])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, folder / "approvals.ipynb")
    open_in_lab(page, jupyter_server, "approvals/approvals.ipynb")
    expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)
    page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    w = page.locator(".gl-run")
    expect(w.locator(".gl-run-all")).to_be_enabled(timeout=SHOWS)

    w.locator(".gl-run-all").click()
    consent = w.locator(".gl-consent")
    expect(consent).to_be_visible(timeout=SHOWS)
    expect(consent.locator(".gl-prompt")).to_contain_text("send(to='desk 1') (approval round 1 of at most 3)")
    expect(w.locator(".gl-run-status")).to_have_attribute("data-status", "waiting")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    w.screenshot(path=str(SCREENSHOTS / "agent-tool-approval.png"))
    consent.locator(".gl-approve").click()

    expect(consent.locator(".gl-prompt")).to_contain_text("send(to='desk 2') (approval round 2", timeout=SHOWS)
    consent.locator(".gl-note textarea").fill("not that desk")
    consent.locator(".gl-deny").click()

    expect(w.locator(".gl-run-status")).to_have_attribute("data-status", "done", timeout=SHOWS)
    expect(consent).to_be_hidden()
    expect(w).to_contain_text("sent to desk 1 | not that desk")
    assert page.dialogs == [], f"a script ran from escaped content: {page.dialogs}"
