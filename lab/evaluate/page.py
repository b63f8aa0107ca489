"""An evaluation, or two compared, as one HTML file to attach to a review (issue 29: the table
and plot "in the HTML export too").

The page is what the notebook shows (the table, the averages, the inline SVG plot), wrapped in a
document that loads nothing: a Content-Security-Policy allows no script and no fetch, so even a
value that escaped its escaping could run nothing, and the file opens from disk with no kernel.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from ..errors import ArgumentError

__all__ = ("write_page",)

POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
"""No script, no fetch, no frame: the page is markup, inline styles and inline SVG."""


def write_page(path: Any, title: str, body: str, *, what: str) -> Path:
    """Write `body` (HTML a notebook shows) as a self-contained page at `path`; returns the path."""
    if not isinstance(path, (str, Path)) or not str(path):
        raise ArgumentError(f"{what}.export_html needs a file path (a str or Path) such as 'eval.html', got {path!r}")
    target = Path(path).expanduser()
    if target.is_dir():
        raise ArgumentError(f"{what}.export_html: {target} is a directory; name a file in it, say {target / 'eval.html'}")
    if not target.parent.exists():
        raise ArgumentError(f"{what}.export_html: the folder {target.parent} does not exist; create it or pick another path")
    target.write_text(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:24px}table{border-collapse:collapse}"
        "td,th{border:1px solid #d0d7de;padding:3px 8px;text-align:left}</style></head>\n"
        f"<body><h1>{html.escape(title)}</h1>\n<p>Exported by Graph Lab: one file, no kernel, no network.</p>\n"
        f"{body}\n</body></html>\n",
        encoding="utf-8",
    )
    return target
