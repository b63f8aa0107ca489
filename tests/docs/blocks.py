"""Code blocks of the Markdown docs: which ones run, and a runner that runs them in order.

A fenced block runs when its language is `python`/`py`, or when it starts with a cell magic
(`%%lab_sql`); every other block (`bash`, `text`, `sql`, a bare fence) is not Python and is
left alone. A Python block that is genuinely not runnable says so in its info string:
```` ```python {test="skip"} ```` (the marker pytest-examples uses), and the text around it says
why. `python tests/docs/blocks.py FILE.md` runs the runnable blocks of FILE in order, each as
one cell of a real IPython shell (so `%lab` lines run as in a notebook), in one process, and
stops at the first block that fails, naming its line.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

__all__ = ("Block", "blocks", "runnable")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^`\n]*)$")
SKIP = '{test="skip"}'


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    """1-based line of the opening fence."""
    info: str
    source: str

    @property
    def lang(self) -> str:
        return self.info.split()[0].lower() if self.info.split() else ""

    @property
    def skipped(self) -> bool:
        return SKIP in self.info

    @property
    def python(self) -> bool:
        return self.lang in ("python", "py", "python3", "ipython") or self.source.lstrip().startswith("%%")

    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of the file, in order."""
    lines = path.read_text().splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        fence, indent = m["fence"], m["indent"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        out.append(Block(path, i + 1, m["info"].strip(), dedent("\n".join(body)) + "\n"))
        i = j + 1
    return out


def runnable(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.python and not b.skipped]


def main(path: str) -> int:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    for block in runnable(Path(path)):
        print(f"--- {block.where()}", flush=True)
        result = shell.run_cell(block.source, store_history=True)
        if not result.success:
            print(f"FAILED: the block at {block.where()} does not run as written", flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
