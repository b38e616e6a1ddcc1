"""Run a blocking function off the event loop in its own daemon thread.

Why not ``asyncio.to_thread``: the default executor has a handful of threads (``min(32, cpus + 4)``: 6 on 2 cores)
and joins them at interpreter exit. A few tool calls that hang forever would take every thread, so later calls
queue behind them, and the finished run could not exit. A daemon thread per call costs ~0.1 ms, a hung one holds
only itself, and it never keeps the process alive. Python cannot kill a thread: after a timeout the call is
abandoned, not stopped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["run_in_daemon_thread"]


def run_in_daemon_thread(fn: Callable[..., Any], *args: Any, name: str = "verl-tool", **kwargs: Any) -> asyncio.Future:
    """A future for ``fn(*args, **kwargs)`` running in a new daemon thread; it resolves on the calling loop."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():  # abandoned after a timeout (cancelled): nobody waits for it
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, error = fn(*args, **kwargs), None
        except Exception as e:  # handed to the awaiting coroutine, which decides
            value, error = None, e
        except BaseException as e:  # SystemExit in a tool thread must not reach the event loop as an exit
            value, error = None, RuntimeError(f"{type(e).__name__} in the tool's thread: {e}")
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:  # the loop has closed: the caller is gone
            pass

    threading.Thread(target=target, name=name, daemon=True).start()
    return future
