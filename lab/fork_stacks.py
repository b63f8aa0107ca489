"""A parallel task's fork stack as stored JSON: repeated rounds written once, with a count.

In a loop that goes round through a fork and a join that is not closed every round (a map whose
join feeds back to the step before the map), pydantic-graph keeps one more frame on every task's
stack each round: `_resolve_join_fork_run` keeps the stack up to and including the join's parent
fork. A checkpoint that wrote every frame grew by a frame a round, so the run's stored JSON (and
reading it back) grew with the square of its rounds (docs/benchmarks.md, issue 28 point 2).

The stored form is still the `fork_stack` list, outermost first, and still readable alone (no
other checkpoint is needed to read one). An entry is either a frame,

    {"fork": "map", "run": 7, "thread": 0}

or a block of frames repeated round after round, each round's runs `run_step` further on:

    {"repeat": [{"fork": "map", "run": 1, "thread": 0}], "times": 4000, "run_step": 1}

which stands for `map` runs 1, 2, ..., 4000, thread 0. The innermost frame is always written
as a frame (so `fork_stack[-1]` in SQL is the task's own fork, as before), and a stack without
repetition is written exactly as before this module existed: a store written before it reads
unchanged, since a list of frames is one of these lists. A loop whose rounds fork the same way
(any number of forks a round, `REPEAT_PERIOD` at most) stores a constant number of entries
however long it runs; a loop whose rounds differ stores the frames it cannot fold, never more
than the plain list.

Encoding is incremental: a new stack is nearly always an earlier stack plus one frame (the
engine pushes a frame when a fork spawns a task), so the encoder keeps the folded form of the
stacks it encoded last (`StackEncoder`) and folds one frame more, instead of walking the stack.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from .engine.tasks import Fork, ForkStack

__all__ = ("StackEncoder", "decode_stack", "StoredStack", "REPEAT_PERIOD", "MAX_FRAMES")

REPEAT_PERIOD = 8
"""The longest round (in frames) folded into a repeat block: forks a loop's body passes a round."""

MAX_FRAMES = 10_000_000
"""A stored stack claiming more frames than this is refused as damaged (a hand-edited `times`)."""

_CACHE = 256
"""Stacks whose folded form the encoder remembers (a map's tasks of a few steps)."""


@dataclass(frozen=True, slots=True)
class _Repeat:
    template: tuple[Fork, ...]
    times: int
    step: int

    def to_json(self) -> dict[str, Any]:
        return {"repeat": [f.to_json() for f in self.template], "times": self.times, "run_step": self.step}


_Seg = Fork | _Repeat


def _continues(rep: _Repeat, i: int, f: Any) -> bool:
    """Whether `f` is frame `i` of the round after `rep`'s last."""
    t = rep.template[i]
    return f.fork_id == t.fork_id and f.thread == t.thread and f.run == t.run + rep.times * rep.step


def _push(segs: list[_Seg], f: Fork) -> None:
    """Fold one more (innermost) frame into `segs`."""
    n = len(segs)
    k = 0  # literal frames after the last repeat block (up to two rounds' worth)
    while k < n and k < 2 * REPEAT_PERIOD and type(segs[n - 1 - k]) is Fork:
        k += 1
    if k < n and isinstance(rep := segs[n - 1 - k], _Repeat):
        p = len(rep.template)
        if k < p and all(_continues(rep, i, x) for i, x in enumerate((*segs[n - k :], f))):
            if k + 1 == p:  # a whole round more: the block absorbs it
                del segs[n - 1 - k :]
                segs.append(_Repeat(rep.template, rep.times + 1, rep.step))
            else:
                segs.append(f)
            return
    segs.append(f)
    k += 1
    for p in range(1, min(REPEAT_PERIOD, k // 2) + 1):
        a, b = segs[-2 * p : -p], segs[-p:]
        step = b[0].run - a[0].run  # type: ignore[union-attr]
        if all(
            x.fork_id == y.fork_id and x.thread == y.thread and y.run - x.run == step  # type: ignore[union-attr]
            for x, y in zip(a, b, strict=True)
        ):
            del segs[-2 * p :]
            segs.append(_Repeat(tuple(a), 2, step))  # type: ignore[arg-type]
            return


class StackEncoder:
    """Folds fork stacks into their stored form, remembering the stacks it folded last.

    The form is a function of the frames alone (folding from an earlier stack's form gives what
    folding from nothing gives), so one encoder may serve every run of a graph revision.
    """

    __slots__ = ("_known", "_ends", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        """A graph revision's codec may serve runs on more than one thread: its memory changes under this."""
        self._known: dict[int, tuple[ForkStack, tuple[_Seg, ...], list[dict[str, Any]]]] = {}
        """id(stack) -> (the stack, the folded form of all its frames, its stored JSON)."""
        self._ends: dict[tuple[int, Fork], int] = {}
        """(length, innermost frame) of a remembered stack -> its id: where a longer stack's prefix is found."""

    def encode(self, stack: ForkStack) -> list[dict[str, Any]]:
        """`stack` as stored: the folded frames but the innermost, then the innermost frame."""
        hit = self._known.get(id(stack))
        if hit is not None and hit[0] is stack:
            return list(hit[2])
        if not stack:
            return []
        head = self._fold(stack[:-1])
        out = [s.to_json() for s in head]
        out.append(stack[-1].to_json())
        segs = list(head)
        _push(segs, stack[-1])
        with self._lock:
            known = self._known
            if len(known) >= _CACHE:
                old = known.pop(next(iter(known)))[0]
                if self._ends.get((len(old), old[-1])) == id(old):
                    del self._ends[(len(old), old[-1])]
            known[id(stack)] = (stack, tuple(segs), out)
            self._ends[(len(stack), stack[-1])] = id(stack)
        return list(out)

    def _fold(self, frames: ForkStack) -> tuple[_Seg, ...]:
        """The folded form of `frames`, from the longest remembered stack they start with.

        A new stack is nearly always a remembered one plus a frame (or a few): its prefixes of the
        last `REPEAT_PERIOD` lengths are looked up by length and innermost frame, and one match is
        compared whole (in C, frame by frame, mostly the same objects)."""
        n = len(frames)
        best: tuple[ForkStack, tuple[_Seg, ...], Any] | None = None
        for m in range(n, max(n - REPEAT_PERIOD, 0), -1):
            sid = self._ends.get((m, frames[m - 1]))
            entry = self._known.get(sid) if sid is not None else None
            if entry is not None and frames[:m] == entry[0]:
                best = entry
                break
        segs: list[_Seg]
        if best is None:
            segs, start = [], 0
        else:
            segs, start = list(best[1]), len(best[0])
        for f in frames[start:n]:
            _push(segs, f)
        return tuple(segs)


def _frame(data: Any) -> Fork:
    return Fork.from_json(data)


def decode_stack(items: Sequence[Any]) -> ForkStack:
    """A stored `fork_stack` (folded, or a plain list of frames as older stores wrote it) as frames.

    Raises KeyError, TypeError or ValueError for a damaged entry (the codec names the checkpoint).
    """
    if not isinstance(items, list):
        raise TypeError(f"a fork stack is a JSON list, got {type(items).__name__}")
    out: list[Fork] = []
    for item in items:
        if "repeat" in item:
            template, times, step = _block(item)
            if len(out) + times * len(template) > MAX_FRAMES:
                raise ValueError(f"a fork stack of more than {MAX_FRAMES:,} frames")
            for i in range(times):
                d = i * step
                out.extend(Fork(t.fork_id, t.run + d, t.thread) for t in template)
        else:
            out.append(_frame(item))
    return tuple(out)


def _block(item: Mapping[str, Any]) -> tuple[tuple[Fork, ...], int, int]:
    template = tuple(_frame(f) for f in item["repeat"])
    times, step = item["times"], item["run_step"]
    if not template or type(times) is not int or type(step) is not int or times < 1:
        raise ValueError(f"a repeat block needs frames, a whole times >= 1 and a whole run_step, got {dict(item)!r}")
    return template, times, step


class StoredStack(Sequence[Mapping[str, Any]]):
    """A stored `fork_stack` read as frames (`{"fork", "run", "thread"}` dicts) without unfolding it.

    Views read a task's innermost frames (from the end) on every step of a long run; this gives
    its length and any frame in time bounded by the stored entries, not by the frames.
    """

    __slots__ = ("_segs", "_ends")

    def __init__(self, items: Sequence[Any]):
        segs: list[tuple[tuple[Fork, ...], int, int]] = []
        ends: list[int] = []
        total = 0
        for item in items or ():
            if isinstance(item, Mapping) and "repeat" in item:
                seg = _block(item)
            else:
                seg = ((_frame(item),), 1, 0)
            total += len(seg[0]) * seg[1]
            segs.append(seg)
            ends.append(total)
        if total > MAX_FRAMES:
            raise ValueError(f"a fork stack of more than {MAX_FRAMES:,} frames")
        self._segs = segs
        self._ends = ends

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def _at(self, i: int) -> dict[str, Any]:
        j = bisect_right(self._ends, i)
        template, _times, step = self._segs[j]
        off = i - (self._ends[j - 1] if j else 0)
        r, k = divmod(off, len(template))
        t = template[k]
        return {"fork": t.fork_id, "run": t.run + r * step, "thread": t.thread}

    @overload
    def __getitem__(self, i: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Mapping[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        n = len(self)
        if isinstance(i, slice):
            return [self._at(k) for k in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("fork stack index out of range")
        return self._at(i)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        for template, times, step in self._segs:
            for r in range(times):
                for t in template:
                    yield {"fork": t.fork_id, "run": t.run + r * step, "thread": t.thread}

    def __reversed__(self) -> Iterator[Mapping[str, Any]]:
        for template, times, step in reversed(self._segs):
            for r in range(times - 1, -1, -1):
                for t in reversed(template):
                    yield {"fork": t.fork_id, "run": t.run + r * step, "thread": t.thread}
