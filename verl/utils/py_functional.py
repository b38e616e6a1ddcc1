"""Small Python helpers under verl's module name (``verl.utils.py_functional``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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


def value_or(value: Any, make: Callable[[], Any]) -> Any:
    """``value``, or ``make()`` when it is None (an empty dataset is still a given one)."""
    return value if value is not None else make()
