"""The error raised for bad arguments where verl asserts."""

from __future__ import annotations

__all__ = ["InvalidArgumentError"]


class InvalidArgumentError(ValueError, AssertionError):
    """A bad argument, with a message naming it and the fix. A ``ValueError``; also an ``AssertionError`` because
    verl checks these cases with ``assert``, and code ported from verl (its tests too) catches that."""
