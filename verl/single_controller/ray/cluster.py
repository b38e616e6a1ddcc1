"""Start (or join) the Ray cluster a run uses, and leave nothing behind.

A local cluster keeps everything inside the run directory: its session files under ``<run_dir>/ray`` and token
authentication with a random token held in the environment (one per process, so every local cluster a process
starts matches the token its driver holds; never written under the home directory). Ray's
unix sockets must have paths under 108 bytes, so when ``<run_dir>/ray`` is too long Ray is pointed at a short
symlink in the system temp dir, removed again at shutdown. ``address`` joins an existing cluster instead
(``ray start --head`` on the head node, then ``ray_init.address=auto`` or ``<ip>:6379``); that cluster is left
running. A local cluster gets a reaper (`verl.single_controller.ray.reaper`) that kills its processes if the driver
is killed.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from verl.utils.import_utils import require

# Ray appends "session_<date>_<time>_<usec>_<pid>/sockets/plasma_store" (about 65 bytes) to its temp dir
_MAX_TEMP_DIR = 40


@dataclass
class RaySession:
    started: bool  # we started a local cluster (and shut it down at the end)
    link: str | None = None  # the short symlink to remove at shutdown
    reaper: subprocess.Popen | None = None  # cleans up after a killed driver (verl.single_controller.ray.reaper)


# One token per process, set before the first local cluster even when Ray was imported earlier (then its default
# token mode would otherwise make up a token under HOME and keep it in the driver): every later local cluster of
# the process (two trainers in one script, a test session) starts with the token the driver already holds.
_PROCESS_TOKEN = secrets.token_hex(16)


def init_ray(run_dir: str, num_cpus: int, num_gpus: int | None = None, address: str | None = None) -> RaySession:
    if not address:
        if "ray" not in sys.modules:  # Ray reads its auth mode once, at import
            os.environ.setdefault("RAY_AUTH_MODE", "token")
        if os.environ.get("RAY_AUTH_MODE", "token") == "token":
            os.environ.setdefault("RAY_AUTH_TOKEN", _PROCESS_TOKEN)
    ray = require("ray", "ray[default]", "the Ray backend (trainer.backend=ray)")
    if ray.is_initialized():
        return RaySession(started=False)
    quiet = {"include_dashboard": False, "log_to_driver": True, "configure_logging": False}
    if address:
        ray.init(address=address, **{k: v for k, v in quiet.items() if k != "include_dashboard"})
        return RaySession(started=False)
    temp_dir = os.path.join(os.path.abspath(run_dir), "ray")
    os.makedirs(temp_dir, exist_ok=True)
    link = None
    if len(temp_dir) > _MAX_TEMP_DIR:
        link = os.path.join(tempfile.gettempdir(), f"verl-ray-{secrets.token_hex(4)}")
        os.symlink(temp_dir, link)
    gpus = {} if num_gpus is None else {"num_gpus": num_gpus}
    ray.init(num_cpus=num_cpus, _temp_dir=link or temp_dir, **gpus, **quiet)
    return RaySession(started=True, link=link, reaper=_start_reaper(link))


def _start_reaper(link: str | None) -> subprocess.Popen | None:
    """The watchdog that kills this cluster's processes if this driver is killed (`verl.single_controller.ray.reaper`);
    None where Ray does not say where its session lives."""
    try:
        from ray._private import worker

        session = worker._global_node.get_session_dir_path()
    except Exception:  # noqa: BLE001 -- a Ray without this private path: no reaper, the rest works
        return None
    cmd = [
        sys.executable,
        "-m",
        "verl.single_controller.ray.reaper",
        str(os.getpid()),
        session,
        *([link] if link else []),
    ]
    return subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def shutdown_ray(session: RaySession | None) -> None:
    if session is None:
        return
    if session.started:
        import ray

        ray.shutdown()
    if session.reaper is not None:  # shut down cleanly: nothing left to reap
        session.reaper.kill()
        session.reaper.wait()
    if session.link and os.path.islink(session.link):
        os.unlink(session.link)
