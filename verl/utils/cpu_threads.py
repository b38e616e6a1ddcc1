"""CPU threads that fit the machine: the OpenMP wait policy and thread count, chosen once at ``import verl``.

torch's CPU kernels run on OpenMP (GNU libgomp in the Linux wheels). When a parallel region ends, libgomp's threads
spin for the next one: with ``OMP_WAIT_POLICY`` unset, 300,000 ``pause`` iterations, 10-15 ms measured on a 2-core
AMD EPYC. A step of a small model runs thousands of regions, so beside another busy process a spinning thread holds
a core that the thread it waits for needs: the quick start took 3.7 s per step beside one busy-loop process and 47 s
beside two, against 0.87 s quiet. libgomp reads its wait settings once, when ``import torch`` loads it, so they have
to be in the environment before that: `apply_thread_policy` runs from ``verl/__init__.py`` (every entry point imports
the package first), and child processes inherit the variables (Ray workers, vLLM's processes, the sandbox's programs
through `thread_env`).

The policy (docs/cpu_threads.md):

- wait: ``GOMP_SPINCOUNT=1000`` (~40 us of spinning, about one sleep/wake round trip, then a futex sleep). On the
  quick start, quiet, it is within the run-to-run spread of libgomp's default (0.84-0.93 s per step against
  0.80-0.99), and 1.9 / 2.1 s per step beside one / two busy processes. A passive policy (no spin) is as good under
  load but ~45% slower quiet here: every region then pays a wake-up; a longer spin is slower under load.
  ``KMP_BLOCKTIME=1`` (ms) does the same for the LLVM / Intel runtime (not measured: no such build here).
  A user who set ``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT`` or ``KMP_BLOCKTIME`` keeps exactly that.
- count: the cores this process may use, physical cores in its affinity mask capped by the cgroup CPU quota. torch
  already follows the affinity mask but not the quota, so ``OMP_NUM_THREADS`` is set only when the quota is lower.
  A user's ``OMP_NUM_THREADS`` wins; ``trainer.num_threads`` sets torch's count when a job starts (`apply_job_threads`).
- ``VERL_THREAD_POLICY=off``: none of this (the behaviour before the policy).

The wait policy decides when a waiting thread sleeps, never how work is split: the same bits at the same thread count
(tested). Only the standard library here: this module runs before torch is imported.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

POLICY_VAR = "VERL_THREAD_POLICY"  # off: leave threads and waits to torch and the OpenMP runtime
WAIT_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
# spin ~40 us (libgomp, ~40 ns per pause iteration measured), 1 ms (LLVM/Intel runtime: its finest unit everywhere)
WAIT_DEFAULTS = {"GOMP_SPINCOUNT": "1000", "KMP_BLOCKTIME": "1"}
COUNT_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
LOADED_CORES = 0.75  # other processes keeping this much of our cores busy make the start-up warning


def policy_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether verl chooses threads and waits (``VERL_THREAD_POLICY`` is not ``off``)."""
    value = (os.environ if environ is None else environ).get(POLICY_VAR, "auto").strip().lower()
    return value not in ("off", "0", "false", "no", "none")


def wait_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The OpenMP wait settings a process runs with: the user's when any is set (all of them, nothing added: one
    would override another), else verl's (none with ``VERL_THREAD_POLICY=off``)."""
    environ = os.environ if environ is None else environ
    user = {k: environ[k] for k in WAIT_VARS if environ.get(k)}
    if user or not policy_enabled(environ):
        return user
    return dict(WAIT_DEFAULTS)


def thread_env(num_threads: int = 1, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Variables for a child process that should run ``num_threads`` threads under this process's wait policy
    (OpenMP, MKL and OpenBLAS counts, the wait settings): merge them into the child's environment before it starts,
    since its OpenMP runtime reads them once, at load."""
    count = str(max(1, int(num_threads)))
    return {**{k: count for k in COUNT_VARS}, **wait_env(environ)}


def parse_cpu_max(text: str) -> float | None:
    """cgroup v2 ``cpu.max`` (``"150000 100000"``: quota and period in us) as CPUs; None for ``max`` (no quota)."""
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    period = float(parts[1]) if len(parts) > 1 else 100000.0
    return float(parts[0]) / period if period > 0 else None


def parse_cfs_quota(quota: str, period: str) -> float | None:
    """cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` as CPUs; None for ``-1`` (no quota)."""
    q, p = int(quota.strip()), int(period.strip())
    return q / p if q > 0 and p > 0 else None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def cgroup_cpu_limit(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> float | None:
    """The CPU quota of this process's cgroup, in CPUs (the smallest over it and its parents); None without one."""
    limits: list[float] = []
    for line in (_read(proc_cgroup) or "").splitlines():
        hier, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        path = path.strip().strip("/")
        if hier == "0" and controllers == "":  # v2: cpu.max in the group's directory and each parent's
            parts = path.split("/") if path else []
            for depth in range(len(parts), -1, -1):
                text = _read(os.path.join(root, *parts[:depth], "cpu.max"))
                limit = parse_cpu_max(text) if text else None
                if limit is not None:
                    limits.append(limit)
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's hierarchy (in a container: its root)
            for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
                limit = _cfs_limit(os.path.join(root, mount, path)) or _cfs_limit(os.path.join(root, mount))
                if limit is not None:
                    limits.append(limit)
                    break
    return min(limits) if limits else None


def _cfs_limit(group: str) -> float | None:
    quota, period = _read(os.path.join(group, "cpu.cfs_quota_us")), _read(os.path.join(group, "cpu.cfs_period_us"))
    return parse_cfs_quota(quota, period) if quota and period else None


def affinity() -> set[int]:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def physical_cores(cpus: Iterable[int], sysfs: str = "/sys/devices/system/cpu") -> int:
    """Distinct physical cores among ``cpus`` (hyperthread siblings count once: two threads on one core's siblings
    share its units and wait for each other at every barrier); ``len(cpus)`` where the topology is unreadable."""
    cpus = sorted(set(cpus))
    cores = set()
    for cpu in cpus:
        topo = os.path.join(sysfs, f"cpu{cpu}", "topology")
        package, core = _read(os.path.join(topo, "physical_package_id")), _read(os.path.join(topo, "core_id"))
        if package is None or core is None:
            return len(cpus)
        cores.add((package.strip(), core.strip()))
    return max(1, len(cores))


def cap_cores(cores: int, limit: float | None) -> int:
    """``cores`` capped by a CPU quota, rounded down and at least 1 (a thread beyond the quota is throttled in every
    period, and the others wait for it at the next barrier)."""
    return max(1, min(cores, int(limit))) if limit is not None else max(1, cores)


def usable_cores() -> int:
    """The cores this process may use: physical cores in its affinity mask, capped by the cgroup CPU quota."""
    return cap_cores(physical_cores(affinity()), cgroup_cpu_limit())


def _positive_int(value: str | None) -> int | None:
    try:
        n = int(value) if value is not None else 0
    except ValueError:
        return None
    return n if n > 0 else None


@dataclass(frozen=True)
class ThreadPlan:
    """What `apply_thread_policy` decided: the variables it sets (never one the user set) and torch's thread count
    under it (None: torch's default, which follows the affinity mask)."""

    env: dict[str, str] = field(default_factory=dict)
    num_threads: int | None = None


def plan_threads(environ: Mapping[str, str], cores: int | None, mask_cpus: int | None) -> ThreadPlan:
    """The policy as a pure function: ``cores`` usable (quota applied), ``mask_cpus`` the CPUs in the affinity mask
    (at least torch's default count); both None when there is no quota (torch's default already fits the mask)."""
    if not policy_enabled(environ):
        return ThreadPlan()
    env = {k: v for k, v in wait_env(environ).items() if k not in environ}
    user = _positive_int(environ.get("OMP_NUM_THREADS"))
    if user is not None:
        return ThreadPlan(env, user)
    if cores is not None and mask_cpus is not None and cores < mask_cpus:
        env["OMP_NUM_THREADS"] = str(cores)  # torch would size its pool by the mask: the quota would throttle it
    return ThreadPlan(env, cores)


@dataclass
class _State:
    plan: ThreadPlan | None = None
    torch_was_loaded: bool = False  # torch was imported before verl: its OpenMP runtime kept its own wait settings
    sample: tuple[float, float, float] | None = None  # (wall, busy CPU seconds of the machine, ours) at the start


_state = _State()


def apply_thread_policy(environ: MutableMapping[str, str] | None = None) -> ThreadPlan | None:
    """Set the policy's variables where the user has not (``setdefault``); called at ``import verl``, before torch
    loads its OpenMP runtime. If torch is already loaded, the count is still applied (``torch.set_num_threads``) and the
    wait settings reach only child processes: a warning says so when the machine is busy and threads > 1."""
    environ = os.environ if environ is None else environ
    if _state.sample is None:
        _state.sample = cpu_sample()
    if not policy_enabled(environ):
        return None
    limit = cgroup_cpu_limit()
    # without a quota torch's default already fits the mask: skip reading the topology on every import
    mask = affinity() if limit is not None else None
    cores = cap_cores(physical_cores(mask), limit) if mask is not None else None
    plan = plan_threads(environ, cores, len(mask) if mask is not None else None)
    for key, value in plan.env.items():
        environ.setdefault(key, value)
    _state.plan = plan
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_num_threads"):
        _state.torch_was_loaded = True
        _after_torch(torch, plan)
    return plan


def _after_torch(torch, plan: ThreadPlan) -> None:
    if "OMP_NUM_THREADS" in plan.env and plan.num_threads and torch.get_num_threads() > plan.num_threads:
        torch.set_num_threads(plan.num_threads)
    if any(k in plan.env for k in WAIT_VARS) and torch.get_num_threads() > 1:
        others = busy_now()
        message = (
            "torch was imported before verl, so this process's OpenMP threads keep their default spin-wait "
            f"({torch.get_num_threads()} threads); beside other busy processes steps can be many times slower: "
            "import verl before torch, or start Python with GOMP_SPINCOUNT=1000 (docs/cpu_threads.md)"
        )
        (logger.warning if others is not None and others >= LOADED_CORES else logger.debug)(message)


def cpu_sample() -> tuple[float, float, float] | None:
    """(wall seconds, busy CPU seconds of the whole machine, CPU seconds of this process and its reaped children)."""
    text = _read("/proc/stat")
    if not text or not text.startswith("cpu "):
        return None
    ticks = [int(x) for x in text.split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait; steal counts as busy: someone else ran
    busy = (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    own = os.times()
    return time.monotonic(), busy, own.user + own.system + own.children_user + own.children_system


def busy_elsewhere(since: tuple[float, float, float] | None, now: tuple[float, float, float] | None) -> float | None:
    """CPUs that other processes kept busy between two `cpu_sample` readings (None when too short to tell)."""
    if since is None or now is None or now[0] - since[0] < 0.2:
        return None
    return max(0.0, ((now[1] - since[1]) - (now[2] - since[2])) / (now[0] - since[0]))


def busy_now() -> float | None:
    """Runnable load from other processes right now (``/proc/loadavg``: the smaller of the 1-minute average and the
    runnable count less this reader), for the one warning that has no earlier sample."""
    fields = (_read("/proc/loadavg") or "").split()
    try:
        return max(0.0, min(float(fields[0]), int(fields[3].split("/")[0]) - 1))
    except (IndexError, ValueError):
        return None


def load_warning(num_threads: int, others: float | None, cores: int, cpus: int) -> str | None:
    """The one-line warning when other processes kept at least ``LOADED_CORES`` of this process's cores busy before
    the job started (``others`` is machine-wide, over ``cpus``; scaled to the ``cores`` this process may use)."""
    if others is None:
        return None
    share = others * min(1.0, cores / max(1, cpus))
    if share < LOADED_CORES:
        return None
    return (
        f"the machine was already busy when this job started (other processes used {others:.1f} of {cpus} CPUs; "
        f"this job runs {num_threads} thread{'s' if num_threads != 1 else ''} on {cores} usable core"
        f"{'s' if cores != 1 else ''}): steps will be slower than on a quiet machine (docs/cpu_threads.md)"
    )


def apply_job_threads(num_threads: int | None = None) -> int:
    """At a job's start: ``trainer.num_threads`` (null: keep the count chosen at import or by the user) applied with
    ``torch.set_num_threads`` (the count can change after import; the wait policy cannot), and a warning when other
    processes kept the cores busy since ``import verl``. Returns torch's thread count."""
    import torch

    if num_threads is not None:
        if int(num_threads) < 1:
            raise ValueError(f"trainer.num_threads={num_threads}: use a count >= 1, or null for the usable cores")
        torch.set_num_threads(int(num_threads))
    threads = torch.get_num_threads()
    now = cpu_sample()
    others = busy_elsewhere(_state.sample, now)
    _state.sample = now  # the next job in this process measures from here
    message = load_warning(threads, others, usable_cores(), os.cpu_count() or 1)
    if message:
        logger.warning(message)
    return threads


def describe_wait(environ: Mapping[str, str] | None = None) -> str:
    """The OpenMP wait settings in force and who chose them, e.g. ``OpenMP wait: GOMP_SPINCOUNT=1000 KMP_BLOCKTIME=1
    (verl's policy)``; for ``verl diagnose``."""
    environ = os.environ if environ is None else environ
    chosen = _state.plan.env if _state.plan else {}
    waits = {k: environ[k] for k in WAIT_VARS if environ.get(k)}
    if not waits:
        wait = "libgomp's default spin (~10 ms after each parallel region)"
        wait += f" ({POLICY_VAR}=off)" if not policy_enabled(environ) else ""
    else:
        who = "verl's policy" if all(chosen.get(k) == v for k, v in waits.items()) else "set by the user"
        wait = " ".join(f"{k}={v}" for k, v in waits.items()) + f" ({who})"
    if _state.torch_was_loaded and any(k in chosen for k in WAIT_VARS):
        wait += ", not in force in this process: torch was imported first"
    return f"OpenMP wait: {wait}"


def describe(environ: Mapping[str, str] | None = None) -> str:
    """`describe_wait` and the usable cores with where they come from (mask, quota)."""
    limit = cgroup_cpu_limit()
    quota = f"cgroup quota {limit:g} CPUs" if limit is not None else "no cgroup quota"
    cores = cap_cores(physical_cores(affinity()), limit)
    return f"{describe_wait(environ)}; usable cores {cores} ({len(affinity())} CPUs in the mask, {quota})"
