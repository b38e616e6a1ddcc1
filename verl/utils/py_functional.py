"""Small Python helpers under verl's module name (``verl.utils.py_functional``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["temp_env_var"]


@contextmanager
def temp_env_var(key: str, value: str) -> Iterator[None]:
    """Set the environment variable ``key`` to ``value`` inside the block; afterwards it has its old value again,
    or is unset if it was unset, also when the block raises."""
    old = os.environ.get(key)
    os.environ[key] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old
