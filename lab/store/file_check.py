"""A journal's link count and size, read without reading its times: the `fsync=True` boundary's file check.

Why not `os.fstat`: on Linux 6.13+ (multigrain timestamps: ext4, xfs, btrfs, tmpfs) a `stat` that
reports a file's times marks them as seen, and the next write then stamps a fine-grained mtime, so
every write changes the inode. On ext4 without a journal `fdatasync` writes a changed inode's table
block and waits for it: a boundary that `fstat`s the journal before its write paid a second disk
write inside its one sync (docs/benchmarks.md, "sync27b": 2.0 block writes a sync against 1.55).
`statx` asking for the link count and size only marks nothing, so the mtime moves only when the
coarse clock ticks (every few ms) and most syncs carry the data alone.

Python before 3.15 has no `os.statx`: libc's is called through `ctypes`. Where it is missing or
refused (not Linux, an old libc, a sandbox that blocks the call) `os.fstat` answers instead: the
check is the same, only the sync may cost a second write there.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from collections.abc import Callable

__all__ = ("FileCheck",)

_AT_EMPTY_PATH = 0x1000
_STATX_NLINK = 0x0004
_STATX_SIZE = 0x0200
_BUFFER = 256
"""`sizeof(struct statx)`."""
_NLINK = struct.Struct("=I")
_NLINK_AT = 16
"""`stx_nlink` (u32) in `struct statx`, after `stx_mask`, `stx_blksize` (u32 each) and `stx_attributes` (u64)."""
_SIZE = struct.Struct("=Q")
_SIZE_AT = 40
"""`stx_size` (u64), after `stx_uid`, `stx_gid` (u32 each), `stx_mode`, a spare u16 and `stx_ino` (u64)."""
_MISSING = (errno.ENOSYS, errno.EPERM, errno.EINVAL)
"""What a kernel or sandbox without `statx` answers: the check falls back to `os.fstat` for good."""


def _libc_statx() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).statx
    except (OSError, AttributeError):  # a libc without statx (glibc < 2.28, some musl builds)
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


_statx = _libc_statx()


class FileCheck:
    """`(st_nlink, st_size)` of an open file, never marking its times as seen (module docstring).

    One per journal: it owns its result buffer, so two journals on two threads do not share one.
    """

    def __init__(self) -> None:
        self._fn = _statx
        self._buf = ctypes.create_string_buffer(_BUFFER) if _statx is not None else None

    @property
    def uses_statx(self) -> bool:
        """False where `statx` is missing or was refused: `os.fstat` answers (and marks the times)."""
        return self._fn is not None

    def __call__(self, fd: int) -> tuple[int, int]:
        fn, buf = self._fn, self._buf
        if fn is not None and fn(fd, b"", _AT_EMPTY_PATH, _STATX_NLINK | _STATX_SIZE, buf) == 0:
            return _NLINK.unpack_from(buf, _NLINK_AT)[0], _SIZE.unpack_from(buf, _SIZE_AT)[0]  # type: ignore[arg-type]
        if fn is not None:
            err = ctypes.get_errno()
            if err not in _MISSING:
                raise OSError(err, os.strerror(err))
            self._fn = None  # this kernel or sandbox has no statx: fstat from now on
        st = os.fstat(fd)
        return st.st_nlink, st.st_size
