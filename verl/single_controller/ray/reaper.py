"""The reaper of a local Ray cluster: a small watchdog process that outlives its driver on purpose.

A driver that shuts Ray down leaves nothing behind. A driver killed with ``kill -9`` cannot: its GCS and raylet
follow it, but the raylet's agents (``DashboardAgent``, ``RuntimeEnvAgent``) were measured to linger for over a
minute (``benchmarks/async_faults.py``), and the short symlink to the session's directory stays. So `init_ray`
starts this process beside every local cluster it starts:

    python -m verl.single_controller.ray.reaper DRIVER_PID SESSION_DIR [LINK]

It sleeps until the driver is gone (or a zombie), then removes the symlink and SIGKILLs every process that still
holds a file under the session's own directory (every Ray process of that cluster does; a later cluster in the same
run directory has a session directory of its own). It holds no file under the session itself.
"""

from __future__ import annotations

import os
import sys
import time

from verl.utils.process_kill import kill_until_gone

__all__ = ["alive", "holding_files_under", "main"]

POLL_S = 0.5


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped by its parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def holding_files_under(path: str) -> list[int]:
    """The pids (this one excepted) with an open file under ``path``."""
    root, me, found = os.path.realpath(path), os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
            if any(os.readlink(f"/proc/{entry}/fd/{fd}").startswith(root) for fd in fds):
                found.append(int(entry))
        except OSError:
            continue
    return found


def main(argv: list[str]) -> int:
    driver, session = int(argv[0]), os.path.realpath(argv[1])  # resolved while the symlink exists
    link = argv[2] if len(argv) > 2 else None
    while alive(driver):
        time.sleep(POLL_S)
    if link and os.path.islink(link):
        os.unlink(link)
    kill_until_gone(lambda: holding_files_under(session), passes=5, pause_s=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
