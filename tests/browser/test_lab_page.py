"""The shared JupyterLab page (lab_page.SharedLab) serves the next test only when nothing of the last
one is left: a failed test, a dialog left open or a page that navigated away gets a new context.

Driven with a stand-in for Playwright's page (no browser needed): what is checked is the decision,
the real page's state is read by the same `STATE` script every browser test's teardown runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .lab_page import CLOSE_ALL, STATE, SharedLab

FRESH = {"left": False, "right": True, "documents": 0, "dialogs": 0, "menus": 0, "toasts": 0}


class FakePage:
    def __init__(self) -> None:
        self.state: dict[str, Any] | None = dict(FRESH)
        self.closed = False
        self.loaded: list[str] = []

    def on(self, event: str, handler: Any) -> None:
        assert event == "dialog"

    def goto(self, url: str) -> None:
        self.loaded.append(url)

    def wait_for_function(self, script: str, timeout: int) -> None:
        pass

    def is_closed(self) -> bool:
        return self.closed

    def evaluate(self, script: str, *args: Any) -> Any:
        if script == STATE:
            return None if self.state is None else json.dumps(self.state)
        if script == CLOSE_ALL and self.state is not None:
            self.state["documents"] = 0
        return None


class FakeContext:
    def __init__(self, page: FakePage) -> None:
        self.page, self.closed = page, False

    def new_page(self) -> FakePage:
        return self.page

    def close(self) -> None:
        self.closed = True


class FakeBrowser:
    def __init__(self) -> None:
        self.contexts: list[FakeContext] = []

    def new_context(self, **_: Any) -> FakeContext:
        self.contexts.append(FakeContext(FakePage()))
        return self.contexts[-1]


class FakeServer:
    url, token = "http://127.0.0.1:1", "t"


def _shared() -> tuple[SharedLab, FakeBrowser]:
    browser = FakeBrowser()
    return SharedLab(browser, FakeServer()), browser


def test_a_passed_test_whose_documents_close_leaves_the_page_for_the_next() -> None:
    shared, browser = _shared()
    page = shared.take()
    assert page.loaded == ["http://127.0.0.1:1/lab?reset&token=t"] and page.dialogs == []
    page.state["documents"] = 2  # the test's notebooks: closed by give_back
    page.dialogs.append("alert")
    shared.give_back(passed=True)
    again = shared.take()
    assert again is page and again.dialogs == [] and len(browser.contexts) == 1
    assert not browser.contexts[0].closed


@pytest.mark.parametrize(
    "leftover",
    [
        {"passed": False},
        {"dialogs": 1},
        {"menus": 1},
        {"toasts": 1},
        {"left": True},
        {"navigated": True},
        {"closed": True},
    ],
)
def test_anything_left_behind_gives_the_next_test_a_new_context(leftover: dict[str, Any]) -> None:
    shared, browser = _shared()
    page = shared.take()
    if leftover.get("navigated"):
        page.state = None  # Notebook 7, or any page that is not JupyterLab at /lab
    elif leftover.get("closed"):
        page.closed = True
    else:
        page.state.update({k: v for k, v in leftover.items() if k != "passed"})
    shared.give_back(passed=leftover.get("passed", True))
    assert browser.contexts[0].closed
    assert shared.take() is not page and len(browser.contexts) == 2
