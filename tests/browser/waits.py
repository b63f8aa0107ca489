"""How long a browser test waits for what a person waits for, sized for a busy machine.

The suite must pass on 2 cores with other work running (load 5): a kernel then takes a minute
to start and a Run All several. These are deadlines, not sleeps: every wait returns as soon as
what it waits for shows, so a quiet machine pays nothing for them.
"""

from __future__ import annotations

KERNEL_UP = 180_000
"""A notebook opened in the browser until its kernel is up (ms)."""

RUN_ALL = 300_000
"""Run > Run All Cells of a notebook until every code cell has run (ms)."""

SHOWS = 90_000
"""A cell's output, a widget or a run's next state until it shows (ms): the default for `expect`."""
