"""Ray helpers under verl's module name (``verl.utils.ray_utils``); Ray is imported when a helper runs."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from verl.utils.errors import InvalidArgumentError
from verl.utils.import_utils import require

__all__ = ["get_event_loop", "parallel_put"]


def parallel_put(data_list: list[Any], max_workers: int | None = None) -> list:
    """``[ray.put(x) for x in data_list]``, with up to ``max_workers`` (default ``min(len, 16)``) puts at once:
    serialising large objects one after the other leaves the object store idle. References keep the input order."""
    if len(data_list) == 0:
        raise InvalidArgumentError("parallel_put: data_list is empty; there is nothing to put")
    ray = require("ray", "ray[default]", "parallel_put")
    with ThreadPoolExecutor(max_workers=max_workers or min(len(data_list), 16)) as pool:
        return list(pool.map(ray.put, data_list))


def get_event_loop() -> asyncio.AbstractEventLoop:
    """This thread's event loop, created (and set) when the thread has none."""
    try:
        return asyncio.get_event_loop()
    except RuntimeError:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        return loop
