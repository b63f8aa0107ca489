"""The checkpoint tree as branches: what the run widget's branch picker and a shared page offer.

After a rewind and a step, a run's checkpoints form a tree; the timeline shows one branch (root
to a tip) at a time. Each leaf of the tree is a branch; the head's branch is the one that holds
the head (the head may sit inside a branch right after a rewind). Pure functions of the parent
links, so they are tested without a store.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ("Branch", "branches")


@dataclass(frozen=True)
class Branch:
    tip: int
    """The leaf checkpoint the branch ends at."""
    fork: int | None
    """The checkpoint it leaves its older sibling at (None for the first branch)."""
    first: int
    """Its first checkpoint after the fork (the root for the first branch)."""
    has_head: bool

    @property
    def label(self) -> str:
        """`0…8`, `from 2: 9…10 · head`: where the branch leaves its sibling, its checkpoints."""
        span = f"{self.first}" if self.first == self.tip else f"{self.first}…{self.tip}"
        where = "" if self.fork is None else f"from {self.fork}: "
        return f"{where}{span}{' · head' if self.has_head else ''}"


def branches(parents: dict[int, int | None], head: int | None) -> list[Branch]:
    """One `Branch` per leaf, oldest first; the first branch is the one through the root's first child."""
    children: dict[int, list[int]] = {}
    for seq, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(seq)
    out = []
    for tip in sorted(s for s in parents if s not in children):
        path = _path(parents, tip)
        fork, first = None, path[0]
        for parent, seq in zip(path, path[1:], strict=False):
            if min(children[parent]) != seq:  # this path leaves the older sibling here
                fork, first = parent, seq
        out.append(Branch(tip, fork, first, head is not None and head in path))
    return out


def _path(parents: dict[int, int | None], seq: int | None) -> list[int]:
    path: list[int] = []
    while seq is not None and seq in parents and len(path) <= len(parents):
        path.append(seq)
        seq = parents[seq]
    return path[::-1]
