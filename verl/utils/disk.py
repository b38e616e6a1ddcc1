"""Telling a full disk from other write errors, and the error that says so.

A full disk does not always surface as ``OSError(ENOSPC)``: ``torch.save``'s zip writer reports a short write as
``RuntimeError: unexpected pos ...``, ``torch.distributed.checkpoint`` wraps it in a ``CheckpointException`` (a
``BaseException``), SQLite says "database or disk is full" through SQLAlchemy and Optuna. So besides the errors'
own words, ``is_disk_full`` asks the file system: a write that failed where (almost) nothing is free ran out of space.
"""

from __future__ import annotations

import errno
import os
import shutil

__all__ = ["DiskFullError", "cause", "free_bytes", "human_bytes", "is_disk_full", "tree_bytes"]

NEARLY_FULL = 1 << 20  # bytes free below which a failed write is taken for a full disk
_WORDS = ("no space left on device", "database or disk is full", "disk quota exceeded")


class DiskFullError(OSError):
    """A write failed because its file system is full (``errno`` is ``ENOSPC``); the message names the place, what
    was kept and the fix."""

    def __init__(self, message: str):
        super().__init__(errno.ENOSPC, message)

    def __str__(self) -> str:  # the message alone: OSError's "[Errno 28] ..." prefix says nothing more
        return self.strerror


def free_bytes(path: str) -> int | None:
    """Bytes an unprivileged write can still use on the file system holding ``path`` (or its nearest existing
    parent); None when that cannot be told."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def is_disk_full(error: BaseException, path: str) -> bool:
    """Whether ``error`` (raised writing under ``path``) came from a full file system: ``ENOSPC``/``EDQUOT`` anywhere
    in its chain, the words of one in its messages, or an I/O-like error (``OSError``, ``RuntimeError``, a
    ``BaseException`` such as DCP's) with less than ``NEARLY_FULL`` bytes free there now. A bad value (``ValueError``
    and the like) is never taken for a full disk, however little room is left."""
    chain = list(_chain(error))
    if any(_says_full(e) for e in chain):
        return True
    io_like = any(isinstance(e, (OSError, RuntimeError)) or not isinstance(e, Exception) for e in chain)
    free = free_bytes(path)
    return io_like and free is not None and free < NEARLY_FULL


def _says_full(e: BaseException) -> bool:
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return any(w in str(e).lower() for w in _WORDS)


def cause(error: BaseException, limit: int = 200) -> str:
    """``Type: last line`` of the error in ``error``'s chain that says the disk is full (else of ``error``): what a
    message quotes, not a wrapper's "Should not reach"."""
    e = next((c for c in _chain(error) if _says_full(c)), error)
    lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [""]
    return f"{type(e).__name__}: {lines[-1][:limit]}".rstrip(": ")


def tree_bytes(path: str) -> int:
    """The bytes of the files under ``path`` (0 when it does not exist)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def human_bytes(n: float | None) -> str:
    """``12.3 MiB``; "an unknown amount" for None."""
    if n is None:
        return "an unknown amount"
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")
