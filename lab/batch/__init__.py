"""Batch runs on Ray: `lab.map(g, inputs, entry=...)` (see `batch.py`, docs/scale.md)."""

from .batch import Batch, BatchRow, release_workers, start_ray

__all__ = ("Batch", "BatchRow", "release_workers", "start_ray")
