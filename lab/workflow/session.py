"""Sealed session folders (seed 004 "Server-managed persistence", "The planning folder").

A workflow run exported to a folder keeps three files there, rewritten after every change of
the run (each event): `session.json`, the human-readable state (validated against
`SessionFile`); `.session-token`, an HMAC-SHA256 seal of session.json's exact bytes under a key
the lab keeps (`session.key` beside the store file, created on first use, readable only by its
owner); and `README.md`, whose Progress table the lab keeps (text outside the table is yours).

Writes are atomic and ordered: both new files are written to temporary names and synced, then
session.json is renamed over the old one, then the token. A crash between the two renames
leaves a token that does not match; reading finds the synced `.session-token.tmp` that does,
and completes the write. Anything else that does not match is a hard `SessionStoreError` with
code `SEAL_MISMATCH`: nothing is resumed from a session file that was changed outside the lab.

The store stays the canonical history (every checkpoint and event); the folder is what a person
reads and what `wf.resume(folder)` continues from, also in a new process or against a new store.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import threading
import weakref
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..engine.loop import lab_loop
from ..errors import RunNotFoundError, RunStateError
from ..store import MEMORY
from .errors import SessionStoreError
from .state import TrailEntry

if TYPE_CHECKING:
    from ..lab import Lab
    from ..records import EventRecord
    from ..run import Run
    from .compile import WorkflowGraph

__all__ = (
    "SCHEMA",
    "SESSION_FILE",
    "TOKEN_FILE",
    "README_FILE",
    "SessionFile",
    "ProgressRow",
    "SessionFolder",
    "attach",
    "read_session",
    "resume",
    "session_index",
    "planning_folder",
    "find_session",
)

SCHEMA = "graphlab.workflow.session/1"
SESSION_FILE = "session.json"
TOKEN_FILE = ".session-token"
README_FILE = "README.md"
KEY_FILE = "session.key"
_TOKEN_PREFIX = "graphlab-session-seal v1"
_BEGIN, _END = "<!-- graphlab:progress:begin -->", "<!-- graphlab:progress:end -->"


class ProgressRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int
    activity: str
    status: Literal["in progress", "waiting", "complete", "failed", "pending", "cancelled"]
    exit: str | None = None
    next: str | None = None
    documents: list[str] = []
    """The documents the activity's worker reported (in session.json only when there are some)."""


class WorkflowRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    digest: str
    revision: int


class CheckpointAsk(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    activity: str
    prompt: str
    choices: list[dict[str, str]]


class SessionFile(BaseModel):
    """The schema of session.json."""

    model_config = ConfigDict(extra="forbid")
    schema_: Literal["graphlab.workflow.session/1"] = Field(alias="schema")
    session_index: str
    workflow: WorkflowRef
    run_id: str
    resumed_from: list[str] = []
    store: str
    status: str
    head: int | None
    current_activity: str | None
    checkpoint: CheckpointAsk | None = None
    variables: dict[str, Any]
    trail: list[TrailEntry]
    progress: list[ProgressRow]
    updated_at: str


def session_index(run_id: str) -> str:
    """The session's 6-character index (seed 004), derived from its run id."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:6]


# -- the lab's key ---------------------------------------------------------------------------

_memory_keys: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()
_key_lock = threading.Lock()


def lab_key(lab: Lab) -> bytes:
    """The key that seals this lab's sessions: `session.key` beside the store (a memory lab's is per process)."""
    with _key_lock:
        if lab.path == MEMORY:
            key = _memory_keys.get(lab.store)
            if key is None:
                key = _memory_keys[lab.store] = secrets.token_bytes(32)
            return key
        path = os.path.join(os.path.dirname(lab.path), KEY_FILE)
        try:
            with open(path, "rb") as f:
                return bytes.fromhex(f.read().decode().strip())
        except FileNotFoundError:
            pass
        except ValueError:
            raise SessionStoreError(
                "KEY_INVALID",
                f"the session key {path} is not a hex key; restore it from a backup (sessions sealed with it cannot be read without it)",
            ) from None
        key = secrets.token_bytes(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key.hex() + "\n")
        return key


def _seal(key: bytes, body: bytes) -> str:
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def _token(key: bytes, index: str, body: bytes) -> bytes:
    return f"{_TOKEN_PREFIX} {index} {_seal(key, body)}\n".encode()


def _token_matches(key: bytes, token: bytes, body: bytes) -> bool:
    parts = token.decode(errors="replace").split()
    if len(parts) != 4 or " ".join(parts[:2]) != _TOKEN_PREFIX:
        return False
    return hmac.compare_digest(parts[3], _seal(key, body))


# -- writing ---------------------------------------------------------------------------------


def _write_synced(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _sync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_sealed(folder: str, key: bytes, doc: dict[str, Any]) -> None:
    """session.json and its seal: temp files synced, then renamed in order (json first, token last)."""
    import json

    body = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()
    SessionFile.model_validate(doc)  # never write what a read would refuse
    json_path, token_path = os.path.join(folder, SESSION_FILE), os.path.join(folder, TOKEN_FILE)
    _write_synced(json_path + ".tmp", body)
    _write_synced(token_path + ".tmp", _token(key, doc["session_index"], body))
    os.replace(json_path + ".tmp", json_path)
    os.replace(token_path + ".tmp", token_path)
    _sync_dir(folder)


def read_session(folder: str | os.PathLike[str], key: bytes) -> SessionFile:
    """Read and verify a session folder: the seal first (`SEAL_MISMATCH`), then the schema."""
    import json

    folder = os.path.abspath(os.fspath(folder))
    json_path, token_path = os.path.join(folder, SESSION_FILE), os.path.join(folder, TOKEN_FILE)
    try:
        with open(json_path, "rb") as f:
            body = f.read()
    except FileNotFoundError:
        raise SessionStoreError(
            "SESSION_MISSING", f"{json_path} does not exist; is {folder} a session folder?"
        ) from None
    try:
        with open(token_path, "rb") as f:
            token = f.read()
    except FileNotFoundError:
        raise SessionStoreError(
            "TOKEN_MISSING",
            f"{token_path} is missing, so {json_path} cannot be verified; the session cannot be resumed",
        ) from None
    if not _token_matches(key, token, body) and not _finish_interrupted_write(key, token_path, body):
        raise SessionStoreError(
            "SEAL_MISMATCH",
            f"{json_path} does not match its seal in {TOKEN_FILE}: it was changed outside the lab, or sealed by "
            "another lab's key (session.key beside its store). Nothing was resumed; restore the file from a "
            "backup, or resume the run from its store with lab.resume(run_id)",
        )
    try:
        data = json.loads(body)
        return SessionFile.model_validate(data)
    except (ValueError, ValidationError) as exc:
        raise SessionStoreError(
            "SCHEMA_INVALID", f"{json_path} is sealed but does not fit the session schema: {exc}"
        ) from None


def _finish_interrupted_write(key: bytes, token_path: str, body: bytes) -> bool:
    """A crash between the two renames: the synced new token is still at its temp name."""
    try:
        with open(token_path + ".tmp", "rb") as f:
            pending = f.read()
    except FileNotFoundError:
        return False
    if not _token_matches(key, pending, body):
        return False
    os.replace(token_path + ".tmp", token_path)
    return True


# -- the document of a run ---------------------------------------------------------------------


def _progress(run: Run, trail: list[TrailEntry]) -> list[ProgressRow]:
    rows = [
        ProgressRow(n=i + 1, activity=t.activity, status="complete", exit=t.exit, next=t.to, documents=list(t.documents))
        for i, t in enumerate(trail)
    ]
    status = run.status
    if status not in ("done",) and run.next_stations:
        current = {
            "running": "in progress",
            "queued": "in progress",
            "waiting": "waiting",
            "failed": "failed",
            "cancelled": "cancelled",
            "interrupted": "in progress",
        }.get(status, "pending")
        rows.append(ProgressRow(n=len(rows) + 1, activity=run.next_stations[0], status=current))  # type: ignore[arg-type]
    return rows


def document(wf: WorkflowGraph, run: Run, resumed_from: list[str]) -> dict[str, Any]:
    state = run.state
    trail = wf.trail(run) if state is not None else []  # read from the branch's checkpoints (lab.workflow.trail)
    wait = run.wait
    details = wait.details if wait is not None and isinstance(wait.details, dict) else {}
    ask = None
    if "workflow_checkpoint" in details and run.status in ("waiting", "queued"):
        ask = {
            "id": details["workflow_checkpoint"],
            "activity": details.get("activity", ""),
            "prompt": details.get("prompt", ""),
            "choices": [
                {"id": c["id"], "label": c.get("label", c["id"])} for c in details.get("choices", [])
            ],
        }
    return {
        "schema": SCHEMA,
        "session_index": session_index(run.id),
        "workflow": {"name": wf.name, "digest": wf.definition.digest, "revision": run.revision},
        "run_id": run.id,
        "resumed_from": resumed_from,
        "store": run.lab.path,
        "status": run.status,
        "head": run.head,
        "current_activity": run.next_stations[0] if run.status != "done" and run.next_stations else None,
        "checkpoint": ask,
        "variables": dict(state.variables) if state is not None else {},
        "trail": [t.model_dump() for t in trail],
        "progress": [r.model_dump(exclude=set() if r.documents else {"documents"}) for r in _progress(run, trail)],
        "updated_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
    }


def progress_table(rows: list[dict[str, Any]]) -> str:
    """The README's Progress table; a Documents column once a worker reported some (seed 004: the
    documents an activity produces are among the notes of the run)."""
    docs = any(r.get("documents") for r in rows)
    lines = ["| # | Activity | Status | Exit | Next |" + (" Documents |" if docs else ""), "| --- | --- | --- | --- | --- |" + (" --- |" if docs else "")]
    for r in rows:
        listed = f" {', '.join(r.get('documents') or [])} |" if docs else ""
        lines.append(
            f"| {r['n']} | {r['activity']} | {r['status']} | {r.get('exit') or ''} | {r.get('next') or ''} |{listed}"
        )
    return "\n".join(lines)


def _readme(existing: str | None, doc: dict[str, Any]) -> str:
    table = f"{_BEGIN}\n{progress_table(doc['progress'])}\n{_END}"
    if existing and _BEGIN in existing and _END in existing:
        head, rest = existing.split(_BEGIN, 1)
        return head + table + rest.split(_END, 1)[1]
    if existing:
        return existing.rstrip("\n") + f"\n\n## Progress\n\n{table}\n"
    request = doc["variables"].get("user_request")
    lines = [
        f"# {doc['workflow']['name']} · session {doc['session_index']}",
        "",
        f"Run `{doc['run_id']}` of workflow `{doc['workflow']['name']}`. "
        "The lab keeps session.json, .session-token and the table below; write your notes anywhere else.",
    ]
    if request:
        lines += ["", f"Request: {request}"]
    return "\n".join([*lines, "", "## Progress", "", table, ""])


# -- a folder bound to a run -------------------------------------------------------------------


class SessionFolder:
    """A planning folder kept in step with one run: rewritten after each of its events."""

    def __init__(self, wf: WorkflowGraph, run: Run, folder: str, resumed_from: list[str]):
        self.wf = wf
        self.run = run
        self.path = folder
        self.resumed_from = resumed_from
        self._lock = threading.Lock()
        self._scheduled = False
        self.error: BaseException | None = None
        """The last write that failed (logged; the run goes on, the store still has everything)."""

    def sync(self) -> dict[str, Any]:
        """Write the folder now from the run as it is; returns the session document."""
        with self._lock:
            doc = document(self.wf, self.run, self.resumed_from)
            write_sealed(self.path, lab_key(self.run.lab), doc)
            readme = os.path.join(self.path, README_FILE)
            try:
                with open(readme, encoding="utf-8") as f:
                    existing: str | None = f.read()
            except FileNotFoundError:
                existing = None
            _write_synced(readme + ".tmp", _readme(existing, doc).encode())
            os.replace(readme + ".tmp", readme)
            self.error = None
            return doc

    def on_run_event(self, ev: EventRecord) -> None:
        """Events arrive while the run changes; write once it has (on the lab's loop)."""
        if self._scheduled:
            return
        self._scheduled = True
        lab_loop().call_soon_threadsafe(self._deferred)

    def _deferred(self) -> None:
        run = self.run
        if run.busy and not run.driving:  # an action on another thread is mid-way
            lab_loop().call_later(0.01, self._deferred)
            return
        self._scheduled = False
        try:
            self.sync()
        except Exception as exc:  # a folder never breaks the run; the store has everything
            import logging

            self.error = exc
            logging.getLogger(__name__).exception("could not write session folder %s", self.path)

    def __repr__(self) -> str:
        return f"<SessionFolder {self.path} run={self.run.id}>"


def attach(
    wf: WorkflowGraph, run: Run, folder: str | os.PathLike[str], *, resumed_from: list[str] | None = None
) -> SessionFolder:
    """Export `run` to `folder` now and keep it current; refuses a folder holding another session."""
    path = planning_folder(wf, folder)
    os.makedirs(path, exist_ok=True)
    existing = wf.sessions.get(run.id)
    if existing is not None and existing.path == path:
        existing.sync()
        return existing
    if os.path.exists(os.path.join(path, SESSION_FILE)):
        other = read_session(path, lab_key(run.lab))
        if (
            other.run_id != run.id
            and run.id not in [other.run_id, *other.resumed_from]
            and other.run_id not in (resumed_from or [])
        ):
            raise SessionStoreError(
                "FOLDER_IN_USE",
                f"{path} holds session {other.session_index} of run {other.run_id}; export run {run.id} to another folder "
                "(or resume that session with wf.resume(folder))",
            )
    session = SessionFolder(wf, run, path, list(resumed_from or []))
    session.sync()
    wf.sessions[run.id] = session
    run.on_event(session.on_run_event)
    return session


def resume(
    wf: WorkflowGraph, folder: str | os.PathLike[str], *, user_request: str | None = None, deps: Any = None
) -> Run:
    """Continue the session in `folder`: verify the seal, then resume its run from the store, or start
    its next activity from the session's state when the store does not hold the run.

    On resume the lab writes the new request (`user_request`) and any declared default the bag
    lacks (seed 004), as a state edit (a new checkpoint).
    """
    text = os.fspath(folder)
    path = find_session(wf, text) if INDEX.match(text) and not os.path.exists(text) else planning_folder(wf, text)
    lab = wf.lab
    doc = read_session(path, lab_key(lab))
    if doc.workflow.name != wf.name:
        raise SessionStoreError(
            "WRONG_WORKFLOW",
            f"{path} is a session of workflow {doc.workflow.name!r}, not {wf.name!r}; resume it with that workflow",
        )
    resumed_from = list(doc.resumed_from)
    try:
        lab.store.get_run(doc.run_id)
        run = lab.resume(doc.run_id, deps=deps)
    except RunNotFoundError:
        if doc.status == "done" or doc.current_activity is None:
            raise RunStateError(
                f"session {doc.session_index} in {path} is done; there is nothing to resume"
            ) from None
        state = wf.state_type(variables=doc.variables, trail=doc.trail)
        from ..graph import LabGraph

        run = LabGraph.start(wf, wf.station(doc.current_activity)(), state=state, deps=deps)
        resumed_from.append(doc.run_id)
    _write_on_resume(wf, run, user_request)
    session = attach(wf, run, path, resumed_from=resumed_from)
    session.resumed_from = resumed_from
    session.sync()
    return run


def _write_on_resume(wf: WorkflowGraph, run: Run, user_request: str | None) -> None:
    bag = dict(run.state.variables)
    updates = {
        v.name: v.default for v in wf.definition.variables.values() if v.has_default and v.name not in bag
    }
    if user_request is not None and bag.get("user_request") != user_request:
        updates["user_request"] = user_request
    if updates and run.status not in ("done", "cancelled"):
        run.edit_state(variables={**bag, **updates})


# -- where a planning folder sits, and finding one by its index ---------------------------------
#
# Seed 004 ("Server-managed persistence"): "agents only ever pass their 6-character session_index",
# and "Two files live in the planning folder under the engineering root". A workflow with an
# engineering root (`wf.root = path`) places every session folder under it: a relative folder is
# taken from the root, one outside it is refused (`SessionStoreError` code `OUTSIDE_ROOT`). Without
# a root any folder is accepted. `wf.resume(index)` takes the index where a folder would go: it
# names a folder this process keeps current, or one found under the root.

INDEX = re.compile(r"^[0-9a-f]{6}$")
MAX_DEPTH = 6
"""How deep under the engineering root a planning folder is looked for."""


def planning_folder(wf: WorkflowGraph, folder: str | os.PathLike[str]) -> str:
    """The absolute planning folder for `folder`: under `wf.root` when the workflow has one."""
    text = os.fspath(folder)
    root = wf.root
    if root is None:
        return os.path.abspath(text)
    base = os.path.realpath(root)
    path = os.path.realpath(os.path.join(base, text))  # an absolute `text` stays itself
    if os.path.commonpath([base, path]) != base:
        raise SessionStoreError(
            "OUTSIDE_ROOT",
            f"{path} is not under the engineering root {base}; a session's planning folder lives under it "
            f"(seed 004): pass a folder inside it, or a path relative to it",
        )
    return path


def find_session(wf: WorkflowGraph, index: str) -> str:
    """The planning folder of the session whose index is `index` (6 hex characters)."""
    found: set[str] = set()
    for run_id, session in wf.sessions.items():
        if session_index(run_id) == index:
            found.add(session.path)
    if not found and wf.root is not None:
        key = lab_key(wf.lab)
        base = os.path.realpath(wf.root)
        for here, dirs, files in os.walk(base):
            if here[len(base) :].count(os.sep) >= MAX_DEPTH:
                dirs[:] = []
            if SESSION_FILE not in files:
                continue
            try:
                doc = read_session(here, key)
            except SessionStoreError:
                continue  # another lab's session, or a damaged one: not this index's
            if doc.session_index == index and doc.workflow.name == wf.name:
                found.add(here)
    if len(found) == 1:
        return found.pop()
    if found:
        raise SessionStoreError("AMBIGUOUS_SESSION", f"session {index} names {len(found)} folders {sorted(found)}; resume one by its path")
    where = f"under the engineering root {wf.root}" if wf.root is not None else "in this process (set wf.root to search a folder tree)"
    raise SessionStoreError("UNKNOWN_SESSION", f"no session {index} of workflow {wf.name!r} {where}")
