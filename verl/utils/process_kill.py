"""Killing a set of processes that may still be forking: scan, SIGKILL, look again."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

__all__ = ["kill_until_gone"]


def kill_until_gone(find: Callable[[], list[int]], passes: int, pause_s: float) -> int:
    """SIGKILL the pids ``find()`` returns, up to ``passes`` times (a process forked between a scan and its kill is
    caught by the next scan), ``pause_s`` apart; returns how many kills were sent. A pid already gone is skipped."""
    sent = 0
    for _ in range(passes):
        pids = find()
        if not pids:
            break
        sent += len(pids)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(pause_s)
    return sent
