"""The extension loads, formats lab objects as escaped HTML, and unloads cleanly."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab

IPython = pytest.importorskip("IPython")


@dataclass
class Text:
    value: str = "<img src=x onerror=alert(1)>"


@dataclass
class Say(BaseNode[Text, None, str]):
    async def run(self, ctx: GraphRunContext[Text, None]) -> End[str]:
        return End(ctx.state.value)


def test_load_format_unload():
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    ip.run_line_magic("load_ext", "kernel_ext")
    ip.run_line_magic("load_ext", "kernel_ext")  # twice is harmless
    lab = Lab(":memory:")
    try:
        g = lab.graph("say", state_type=Text, output_type=str)
        g.node(Say)
        run = g.start(Say(), state=Text()).run()
        html_formatter = ip.display_formatter.formatters["text/html"]
        html_formatter.enabled = True  # a terminal test shell has HTML output switched off
        html = html_formatter(run)
        assert "done" in html and "&lt;img src=x onerror=alert(1)&gt;" in html and "<img" not in html
        assert run.id in ip.display_formatter.formatters["text/plain"](run)
        ghtml = html_formatter(g)
        assert "Say" in ghtml and "__end__" in ghtml
    finally:
        lab.close()
        ip.run_line_magic("unload_ext", "kernel_ext")
    assert html_formatter(run) is None
