"""Batch runs on Ray: `lab.map(g, inputs, entry=...)`, for a graph of any kind (see `batch.py`, docs/scale.md)."""

from .batch import Batch, BatchRow, release_workers, start_ray
from .inputs import StartWith
from .runtimes import RuntimeShippingError
from .spec import GraphShippingError

__all__ = ("Batch", "BatchRow", "GraphShippingError", "RuntimeShippingError", "StartWith", "release_workers", "start_ray")
