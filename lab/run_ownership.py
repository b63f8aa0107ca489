"""Who advances a run: this process, or another live one; and taking a stored run over.

Mixed into `Run`. One process at a time advances a run (docs/store.md "Who holds what, when"):
a handle on a run another live process advances reads it (`_follow` takes in what that process
wrote), forks it and answers its wait once, and refuses the rest naming that process. What
`lab.resume` uses to set up a handle it opens from the store is public here, so a kind (or the
facade) never sets a run's private fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import RunOwnedError

if TYPE_CHECKING:
    from .records import Status, WaitRecord
    from .run import Run
    from .store.holders import Process

__all__ = ("Ownership",)


class Ownership:
    """Mixed into `Run`: the process that advances it, following it, and taking it over on `lab.resume`."""

    @property
    def writer(self: Run) -> str | None:  # type: ignore[misc]
        """Who advances this run when another process does ("process 123 on host h (started ...)"), else None."""
        return self._writer.describe() if self._writer is not None else None

    def _follow(self: Run) -> bool:  # type: ignore[misc]
        """Take in what another process wrote: its progress on a run it advances, or an answer given there.

        Returns True when something changed. The run view calls it on a timer; stepping does it itself.
        """
        if self._writer is not None:
            return self._reload()
        if self._status == "waiting" and not self._busy.locked():
            return self._take_in_answers()
        return False

    def _reload(self: Run) -> bool:  # type: ignore[misc]
        """Read this run (advanced by another process) from the store again."""
        store = self.lab.store
        codec = self._built.codec
        with store.held():
            rec = store.get_run(self.id)
            seen = (self._status, self._head, len(self._head_waits), self._wait.resolution if self._wait else None)
            head = store.checkpoint(self.id, rec.head_seq) if rec.head_seq is not None else None
            waits = [w for w in store.waits(self.id) if w.checkpoint_seq == rec.head_seq]
        self._status, self._head, self._error, self._output_json = rec.status, rec.head_seq, rec.error, rec.output
        self._output = codec.decode_output(rec.output, run_id=self.id) if rec.status == "done" else None
        bps = rec.breakpoints or {}
        self._breakpoints = {w: set(bps.get(w, ())) for w in ("before", "after")}
        if head is not None and head.state != self._state_json:
            self._state_json = head.state
            self._state = codec.decode_state(head.state, run_id=self.id, seq=head.seq)
        if head is not None:
            self._pending = [codec.decode_node(p, run_id=self.id, seq=head.seq) for p in head.next]
            self._counters = dict(head.counters or {})
        self._head_waits = waits if len(waits) > 1 else []
        self._wait = next((w for w in waits if w.resolution is None), waits[-1] if waits else None)
        return seen != (self._status, self._head, len(self._head_waits), self._wait.resolution if self._wait else None)

    def _check_writer(self: Run, action: str) -> None:  # type: ignore[misc]
        """Refuse to change a run another live process advances, naming it and what to do."""
        writer = self._writer
        if writer is None:
            return
        if writer.is_alive():
            raise RunOwnedError(
                f"cannot {action} run {self.id}: it is advanced by {writer.describe()}, one writer at a time. "
                f"{action.capitalize()} it in that process, or end it (or call lab.close() there) and take the run over "
                f"here with lab.resume({self.id!r}). From here you can read it (run.history(), run.state_at(seq), "
                "lab.sql(...)), fork it, and answer its wait once"
            )
        raise RunOwnedError(
            f"cannot {action} run {self.id} with this handle: it was advanced by {writer.describe()}, which has "
            f"ended; take the run over here with run = lab.resume({self.id!r})"
        )

    def continue_interrupted(self: Run) -> None:  # type: ignore[misc]
        """`lab.resume` of a run interrupted in this process: its station may run again (a `resumed` event)."""
        with self._exclusive("resume"):
            if self._status != "interrupted":
                return
            self._write(
                [
                    self._event_row("resumed", checkpoint_seq=self._head, payload={"status_before": "interrupted"}),
                    self.lab.store.update_row(self.id, status="running", head_seq=self._head),
                ],
                sync=True,
            )
            self._status = "running"

    _continue_interrupted = continue_interrupted  # the name lab.lab still calls (until it takes the public one)

    def advanced_by(self: Run, writer: Process) -> None:  # type: ignore[misc]
        """Make this handle a reader: the live process `writer` advances the run (`lab.resume` found it so)."""
        self._writer = writer

    def set_head_waits(self: Run, waits: list[WaitRecord]) -> None:  # type: ignore[misc]
        """The waits bound to the head when several parallel branches parked in one step (`lab.resume` reads them)."""
        self._head_waits = list(waits)
        self._wait = next((w for w in waits if w.resolution is None), waits[-1])

    def record_resumed(self: Run, status_before: Status) -> None:  # type: ignore[misc]
        """Write the `resumed` event of a run this process took over (`lab.resume`); an interrupted run goes
        on `running` (its station runs again because a person asked). A done or cancelled run writes nothing."""
        if status_before in ("done", "cancelled"):
            return
        rows = [self._event_row("resumed", checkpoint_seq=self._head, payload={"status_before": status_before})]
        if status_before == "interrupted":
            self._status = "running"
            rows.append(self.lab.store.update_row(self.id, status="running", head_seq=self._head))
        self._write(rows, sync=True)
