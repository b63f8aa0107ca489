"""Where a board keeps its subprocess jobs' folders (docs/agents.md, "Where jobs run").

A store file keeps them beside itself (`lab.duckdb.jobs/`); an in-memory store in a fresh
temporary folder; a server store (`postgresql://...`) has no file, so its jobs live under this
user's cache folder, in a folder named by a digest of the store's URL without its password:

    $XDG_CACHE_HOME/graphlab/jobs/<digest>/<request_id>/     (~/.cache when XDG_CACHE_HOME is unset)

The folder is per host (each host's workers write to their own disk), never a path spelled from
the URL's text, and the same for every lab process of this user that opens that store.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile

__all__ = ("MEMORY", "cache_root", "jobs_folder", "url_digest")

MEMORY = ":memory:"
"""The path of an in-memory store."""

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_PASSWORD = re.compile(r"^([^:/]+://[^:/@]*):[^@/]*@")


def url_digest(url: str) -> str:
    """A short digest of `url` without its password (a redacted URL and the full one give the same)."""
    plain = _PASSWORD.sub(r"\1@", url)
    return hashlib.sha256(plain.encode("utf-8")).hexdigest()[:20]


def cache_root() -> str:
    """This user's cache folder: $XDG_CACHE_HOME, else ~/.cache, else a per-user folder in the temp dir."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return xdg
    home = os.path.expanduser("~")
    if os.path.isabs(home):
        return os.path.join(home, ".cache")
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"graphlab-{uid}")


def jobs_folder(store_path: str) -> str:
    """The absolute folder of the subprocess jobs of the store at `store_path` (its file path or URL)."""
    if store_path == MEMORY:
        return tempfile.mkdtemp(prefix="graphlab-jobs-")
    if _URL.match(store_path):
        return os.path.join(cache_root(), "graphlab", "jobs", url_digest(store_path))
    return os.path.abspath(store_path) + ".jobs"
