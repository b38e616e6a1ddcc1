"""vLLM-CPU's shared-memory files of a tensor-parallel engine, left behind by a process that died.

With ``tensor_model_parallel_size > 1`` on a CPU, vLLM all-reduces through a shared-memory file per rank in
``/dev/shm``, named after the engine's TP group only when the engine joins the trainer's world (``external_launcher``:
``-tp:0-[0-1]-cpushm_<rank>``, no per-run part). A process killed mid-run leaves its file, and the next engine on the
machine then fails to start with ``create shm in SHMManager failed. errno: 17`` (EEXIST). Before such an engine is
built, `clear_stale_tp_shm` removes the files no live process maps, and names the ones another run still holds.
"""

from __future__ import annotations

import glob
import logging
import os

__all__ = ["SHM_DIR", "clear_stale_tp_shm", "files_in_use"]

logger = logging.getLogger(__name__)
SHM_DIR = "/dev/shm"
PATTERN = "*-cpushm_*"


def files_in_use(paths: list[str]) -> set[str]:
    """The ``paths`` some live process maps or holds open (read from /proc; processes we may not read are skipped)."""
    wanted, held = set(paths), set()
    for proc in glob.glob("/proc/[0-9]*"):
        try:
            with open(os.path.join(proc, "maps")) as f:
                held |= {line.split(maxsplit=5)[-1].strip() for line in f if "cpushm" in line} & wanted
            for fd in os.listdir(os.path.join(proc, "fd")):
                target = os.readlink(os.path.join(proc, "fd", fd))
                if target in wanted:
                    held.add(target)
        except OSError:  # the process ended while we read it, or is not ours to read
            continue
    return held


def clear_stale_tp_shm(shm_dir: str = SHM_DIR) -> list[str]:
    """Remove vLLM-CPU TP shared-memory files in ``shm_dir`` that no live process maps; returns the removed paths.
    Files another process holds stay, with a warning: that run's engine and this one would share the name."""
    paths = sorted(glob.glob(os.path.join(shm_dir, PATTERN)))
    if not paths:
        return []
    held = files_in_use(paths)
    removed = []
    for path in paths:
        if path in held:
            logger.warning(
                "%s belongs to a running vLLM-CPU tensor-parallel engine; a second such engine on this machine "
                "uses the same name and will fail to start (errno 17)",
                path,
            )
            continue
        try:
            os.unlink(path)
            removed.append(path)
        except FileNotFoundError:  # another rank of this engine removed it first
            pass
    if removed:
        logger.warning("removed vLLM-CPU shared memory left by a process that died: %s", ", ".join(removed))
    return removed
