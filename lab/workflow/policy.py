"""An activity's retry policy and time limit as a workflow file declares them.

```yaml
- id: fetch
  retry: {max_attempts: 3, backoff: 0.5, on: [ConnectionError, TimeoutError]}
  timeout: 30
```

`retry` takes `lab.Retry`'s arguments (`max_attempts`, `backoff`, `factor`, `max_backoff`), and
`on` names built-in exception classes (default: any `Exception`); `timeout` is the seconds each
try may take. The compiled workflow gives the activity's station that policy (`wf.set_policy`),
so a workflow activity is retried exactly as a node declared with `@g.node(retry=...)`.

Also the option ids of a consent checkpoint (`consent: true`), answered by `run.approve()` and
`run.deny()`.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from ..errors import LabError
from ..limits import check_timeout
from ..retry import Retry

__all__ = ("CONSENT_OPTIONS", "RETRY_KEYS", "retry_policy", "retry_problems", "timeout_problem")

CONSENT_OPTIONS = ("approve", "deny")
"""A consent checkpoint's options: `run.approve()` answers `approve`, `run.deny()` answers `deny`."""

RETRY_KEYS = ("max_attempts", "backoff", "factor", "max_backoff", "on")


def _exception(name: Any) -> type[BaseException] | None:
    cls = getattr(builtins, name, None) if isinstance(name, str) else None
    return cls if isinstance(cls, type) and issubclass(cls, Exception) else None


def retry_policy(spec: Mapping[str, Any]) -> Retry:
    """The `Retry` a declared `retry:` mapping stands for (checked by `retry_problems` when loaded)."""
    args = {k: v for k, v in spec.items() if k != "on"}
    on = spec.get("on")
    if on is not None:
        names = [on] if isinstance(on, str) else list(on)
        args["on"] = tuple(_exception(n) for n in names)
    return Retry(**args)


def retry_problems(raw: Any, path: str) -> list[tuple[str, str]]:
    """What is wrong with a declared `retry:` (path, message); [] when it makes a policy."""
    if not isinstance(raw, Mapping):
        return [(path, "expected a mapping such as {max_attempts: 3, backoff: 0.5, on: [ConnectionError]}")]
    problems = [
        (f"{path}.{key}", f"unknown key (allowed here: {', '.join(RETRY_KEYS)})")
        for key in raw
        if key not in RETRY_KEYS
    ]
    on = raw.get("on")
    if on is not None:
        names = [on] if isinstance(on, str) else on if isinstance(on, list) else None
        if not names:
            problems.append(
                (
                    f"{path}.on",
                    "expected a list of exception class names, e.g. [ConnectionError, TimeoutError]",
                )
            )
        for i, name in enumerate(names or []):
            if _exception(name) is None:
                problems.append(
                    (
                        f"{path}.on[{i}]",
                        f"{name!r} is not a built-in exception class (ConnectionError, TimeoutError, "
                        "ValueError, Exception, ...); for other classes give the policy in code: wf.set_policy(activity, retry=Retry(...))",
                    )
                )
    if not problems:
        try:
            retry_policy(raw)
        except LabError as exc:
            problems.append((path, str(exc)))
    return problems


def timeout_problem(raw: Any) -> str | None:
    """Why a declared `timeout:` is not a time limit in seconds, or None."""
    try:
        check_timeout(raw, "timeout")
    except LabError as exc:
        return str(exc)
    if raw is None:
        return "expected a number of seconds > 0"
    return None
