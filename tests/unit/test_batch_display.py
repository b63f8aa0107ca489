"""What a batch cell and a SQL cell show (issue 25 item 7).

- the progress bar is drawn in proportion: at "done 5 · failed 1" five sixths are green and one
  sixth red, not the whole bar red
- Ray's "Token authentication is enabled" notice, which `ray.init` logs and which reached the
  cell as a red stderr block, is kept out; Ray's other warnings still show (the real `ray.init`
  of a notebook's first `lab.map`: tests/notebooks/test_notebooks.py, batch.ipynb)
- `%%lab_sql` shows a list of JSON values as one JSON array (`["Inc"]`), not double-escaped
"""

from __future__ import annotations

import logging
import re

import pytest

from kernel_ext.display import SqlResult
from lab import Lab
from lab.widgets.batch_widget import BatchProgress
from tests.conftest import Counter, Inc, declare_counter


def _widths(html: str) -> dict[str, float]:
    return {s: float(w) for s, w in re.findall(r'data-status="(\w+)"[^>]*width:([\d.]+)%', html)}


def test_the_progress_bar_shows_proportions() -> None:
    w = BatchProgress(total=6, title="b")
    w.update({"done": 5, "failed": 1})
    widths = _widths(w.bar.value)
    assert widths == pytest.approx({"done": 500 / 6, "failed": 100 / 6}, abs=0.01)
    assert "#16a34a" in w.bar.value and "#dc2626" in w.bar.value  # green, red
    assert w.tally.value == "done 5 · failed 1" and w.value == 6
    w.update({"done": 2, "waiting": 1})
    assert _widths(w.bar.value) == pytest.approx({"done": 200 / 6, "waiting": 100 / 6}, abs=0.01)
    assert "to go 3" in w.tally.value  # the rest is the grey track


def test_rays_token_notice_is_kept_out_and_other_warnings_stay() -> None:
    """What reaches the logger's handlers (stderr in a notebook): not the notice, every other line.

    A handler of the test's own is read rather than stderr: a Ray started earlier in this process
    (the session's) may have pointed Ray's handlers elsewhere."""
    from ray._private.authentication import authentication_token_setup as setup

    from lab.batch.ray_start import TOKEN_LOGGER, quiet_token_notice

    assert setup.logger.name == TOKEN_LOGGER
    logger = logging.getLogger(TOKEN_LOGGER)
    seen: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        quiet_token_notice()
        quiet_token_notice()  # once is enough; twice adds nothing
        setup._warn_token_auth_enabled()  # what ray.init logs
        logger.warning("another Ray warning")
    finally:
        logger.removeHandler(handler)
    assert not any("Token authentication is enabled" in m for m in seen), seen
    assert "another Ray warning" in seen


def test_sql_shows_a_list_of_json_values_as_json() -> None:
    lab = Lab(":memory:")
    try:
        declare_counter(lab).start(Inc(), state=Counter()).run()
        rel = lab.sql(
            "select payload->'$.next[*]' as next_list, payload->'next' as next_json from events "
            "where kind = 'settled' and node_id = 'Check' order by seq limit 1"
        )
        shown = SqlResult(rel)
        assert shown.types == ["JSON[]", "JSON"]
        assert shown._cells() == [('["Inc"]', '["Inc"]')]
        assert '\\"' not in repr(shown) and "&quot;Inc&quot;" in shown._repr_html_()
    finally:
        lab.close()
