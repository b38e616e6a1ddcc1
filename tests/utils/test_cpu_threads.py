"""The CPU thread policy (verl.utils.cpu_threads): cores from the affinity mask and the cgroup quota, the user's
variables first, the short OpenMP spin in place before torch loads, the busy-machine warning, and the same bits
whatever the wait policy."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from verl.utils import cpu_threads
from verl.utils.cpu_threads import (
    ThreadPlan,
    apply_thread_policy,
    busy_elsewhere,
    cap_cores,
    cgroup_cpu_limit,
    load_warning,
    parse_cfs_quota,
    parse_cpu_max,
    physical_cores,
    plan_threads,
    thread_env,
    wait_env,
)
from verl.utils.wall_clock import WALL_CLOCK

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPIN = {"GOMP_SPINCOUNT": "1000", "KMP_BLOCKTIME": "1"}


def test_cgroup_quota_files_parse_to_cpus():
    assert parse_cpu_max("max 100000\n") is None
    assert parse_cpu_max("150000 100000\n") == 1.5
    assert parse_cpu_max("200000") == 2.0  # the period defaults to 100 ms
    assert parse_cfs_quota("-1\n", "100000\n") is None
    assert parse_cfs_quota("50000\n", "100000\n") == 0.5


def _write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota_is_the_smallest_over_the_group_and_its_parents(tmp_path):
    _write(tmp_path / "proc", "0::/user.slice/job\n")
    _write(tmp_path / "cg" / "user.slice" / "job" / "cpu.max", "max 100000\n")
    _write(tmp_path / "cg" / "user.slice" / "cpu.max", "250000 100000\n")
    assert cgroup_cpu_limit(str(tmp_path / "proc"), str(tmp_path / "cg")) == 2.5
    _write(tmp_path / "cg" / "cpu.max", "100000 100000\n")  # the root's quota is lower still
    assert cgroup_cpu_limit(str(tmp_path / "proc"), str(tmp_path / "cg")) == 1.0


def test_cgroup_v1_quota_and_a_container_that_sees_its_group_as_the_root(tmp_path):
    _write(tmp_path / "proc", "5:memory:/x\n3:cpu,cpuacct:/docker/abc\n0::/\n")
    _write(tmp_path / "cg" / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "150000\n")
    _write(tmp_path / "cg" / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_limit(str(tmp_path / "proc"), str(tmp_path / "cg")) == 1.5
    # inside the container the group's own path is absent: its files are at the controller's root
    _write(tmp_path / "proc2", "3:cpu,cpuacct:/docker/other\n")
    _write(tmp_path / "cg" / "cpu,cpuacct" / "cpu.cfs_quota_us", "300000\n")
    _write(tmp_path / "cg" / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_limit(str(tmp_path / "proc2"), str(tmp_path / "cg")) == 3.0


def test_no_cgroup_or_no_quota_means_no_limit(tmp_path):
    assert cgroup_cpu_limit(str(tmp_path / "missing"), str(tmp_path)) is None
    _write(tmp_path / "proc", "1:cpu:/\n")
    _write(tmp_path / "cpu" / "cpu.cfs_quota_us", "-1\n")
    _write(tmp_path / "cpu" / "cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_limit(str(tmp_path / "proc"), str(tmp_path)) is None


def test_hyperthread_siblings_count_once(tmp_path):
    for cpu, core in enumerate([0, 1, 0, 1]):  # cpus 0/2 and 1/3 share a core
        _write(tmp_path / f"cpu{cpu}" / "topology" / "core_id", f"{core}\n")
        _write(tmp_path / f"cpu{cpu}" / "topology" / "physical_package_id", "0\n")
    assert physical_cores([0, 1, 2, 3], str(tmp_path)) == 2
    assert physical_cores([0, 2], str(tmp_path)) == 1  # an affinity mask of one core's two hyperthreads
    assert physical_cores([0, 1, 7], str(tmp_path)) == 3  # unreadable topology: one core per CPU


def test_the_quota_caps_the_cores_rounding_down():
    assert cap_cores(8, None) == 8
    assert cap_cores(8, 2.5) == 2
    assert cap_cores(8, 0.5) == 1
    assert cap_cores(2, 16.0) == 2


def test_the_policy_adds_a_short_spin_and_keeps_torch_s_count_without_a_quota():
    assert plan_threads({}, None, None) == ThreadPlan(SPIN, None)


def test_a_quota_below_the_mask_sets_the_count():
    plan = plan_threads({}, 2, 8)
    assert plan.env == {**SPIN, "OMP_NUM_THREADS": "2"} and plan.num_threads == 2
    assert "OMP_NUM_THREADS" not in plan_threads({}, 8, 8).env  # torch's default is already right


def test_the_user_s_variables_win():
    assert plan_threads({"OMP_NUM_THREADS": "3"}, 2, 8) == ThreadPlan(SPIN, 3)
    # any wait setting of the user's stays alone: GOMP_SPINCOUNT would override OMP_WAIT_POLICY in libgomp
    assert plan_threads({"OMP_WAIT_POLICY": "PASSIVE"}, None, None).env == {}
    assert plan_threads({"GOMP_SPINCOUNT": "0"}, None, None).env == {}
    assert plan_threads({"KMP_BLOCKTIME": "0"}, None, None).env == {}
    assert plan_threads({"OMP_NUM_THREADS": "junk"}, 2, 8).env["OMP_NUM_THREADS"] == "2"  # not a count: ignored


@pytest.mark.parametrize("value", ["off", "OFF", "0", "false"])
def test_the_switch_turns_the_policy_off(value):
    assert plan_threads({"VERL_THREAD_POLICY": value}, 2, 8) == ThreadPlan()
    assert wait_env({"VERL_THREAD_POLICY": value}) == {}


def test_apply_sets_only_what_is_unset(monkeypatch):
    monkeypatch.setattr(cpu_threads, "cgroup_cpu_limit", lambda: None)
    monkeypatch.setattr(cpu_threads, "_state", cpu_threads._State())  # this process's record stays as import left it
    env = {"KMP_BLOCKTIME": "0", "PATH": "/bin"}
    apply_thread_policy(env)
    assert env == {"KMP_BLOCKTIME": "0", "PATH": "/bin"}  # a user wait setting: nothing added
    env = {}
    apply_thread_policy(env)
    assert env == SPIN
    monkeypatch.setattr(cpu_threads, "cgroup_cpu_limit", lambda: 1.0)  # a container's --cpus=1
    monkeypatch.setattr(cpu_threads, "affinity", lambda: {0, 1, 2, 3})
    monkeypatch.setattr(cpu_threads, "physical_cores", lambda cpus: len(cpus))
    env = {}
    apply_thread_policy(env)
    assert env == {**SPIN, "OMP_NUM_THREADS": "1"}


def test_children_get_the_count_and_this_process_s_wait_policy():
    assert thread_env(1, {}) == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", **SPIN}
    assert thread_env(2, {"OMP_WAIT_POLICY": "PASSIVE"})["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "GOMP_SPINCOUNT" not in thread_env(2, {"OMP_WAIT_POLICY": "PASSIVE"})
    assert thread_env(4, {"VERL_THREAD_POLICY": "off"}) == {k: "4" for k in cpu_threads.COUNT_VARS}


def test_busy_machine_warning():
    # the machine's busy CPU seconds rose by 3 over 2 s while this process used 1: 1 CPU busy elsewhere
    assert busy_elsewhere((0.0, 10.0, 1.0), (2.0, 13.0, 2.0)) == 1.0
    assert busy_elsewhere((0.0, 10.0, 1.0), (0.1, 13.0, 2.0)) is None  # too short a window to tell
    message = load_warning(2, 1.0, 2, 2)
    assert "already busy" in message and "1.0 of 2 CPUs" in message and "\n" not in message
    assert load_warning(2, 0.2, 2, 2) is None  # background noise
    assert load_warning(2, 10.0, 2, 64) is None  # a big host's load spread over its 64 CPUs: ~0.3 of our 2 cores
    assert load_warning(2, None, 2, 2) is None


def test_job_threads_key_and_warning(monkeypatch, caplog):
    import torch

    before = torch.get_num_threads()
    samples = iter([(5.0, 30.0, 3.0)])
    monkeypatch.setattr(cpu_threads, "cpu_sample", lambda: next(samples))
    monkeypatch.setattr(cpu_threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(cpu_threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(cpu_threads._state, "sample", (0.0, 20.0, 1.0))  # 8 busy CPU-seconds elsewhere in 5 s
    try:
        with caplog.at_level(logging.WARNING, logger=cpu_threads.__name__):
            assert cpu_threads.apply_job_threads(2) == 2 == torch.get_num_threads()
        assert "already busy" in caplog.text and "1.6 of 2 CPUs" in caplog.text
        with pytest.raises(ValueError, match="trainer.num_threads=0"):
            cpu_threads.apply_job_threads(0)
    finally:
        torch.set_num_threads(before)


def test_diagnose_line_says_who_chose_the_wait(monkeypatch):
    monkeypatch.setattr(cpu_threads, "_state", cpu_threads._State(plan=ThreadPlan(dict(SPIN))))
    assert cpu_threads.describe_wait(SPIN) == "OpenMP wait: GOMP_SPINCOUNT=1000 KMP_BLOCKTIME=1 (verl's policy)"
    assert cpu_threads.describe_wait({"OMP_WAIT_POLICY": "PASSIVE"}).endswith("PASSIVE (set by the user)")
    assert "default spin" in cpu_threads.describe_wait({"VERL_THREAD_POLICY": "off"})
    monkeypatch.setattr(cpu_threads._state, "torch_was_loaded", True)
    assert "torch was imported first" in cpu_threads.describe_wait(SPIN)


def test_the_suite_runs_under_the_policy():
    """tests/conftest.py imports verl before any test module imports torch, so this process's OpenMP runtime read
    the policy's wait settings (and the suite's one thread)."""
    assert cpu_threads._state.torch_was_loaded is False
    if cpu_threads.policy_enabled():
        assert wait_env() and all(os.environ.get(k) == v for k, v in wait_env().items())
    assert os.environ.get("OMP_NUM_THREADS")


def _clean_env(*keep: str) -> dict[str, str]:
    """This environment without the policy's variables (but ``keep``): a fresh shell's."""
    drop = {*cpu_threads.WAIT_VARS, "OMP_NUM_THREADS", cpu_threads.POLICY_VAR} - set(keep)
    return {k: v for k, v in os.environ.items() if k not in drop} | {"PYTHONPATH": ROOT, "TQDM_DISABLE": "1"}


def _fresh(code: str, **env: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], env=_clean_env() | env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# what the OpenMP runtime sees: the C library's getenv, which libgomp calls when torch loads it
PROBE = """
import ctypes, json
{imports}
from verl.utils import cpu_threads
getenv = ctypes.CDLL(None).getenv
getenv.restype = ctypes.c_char_p
seen = {{k: (getenv(k.encode()) or b"").decode() for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "KMP_BLOCKTIME")}}
print(json.dumps({{"seen": seen, "threads": torch.get_num_threads(), "usable": cpu_threads.usable_cores(),
                   "quota": cpu_threads.cgroup_cpu_limit(), "torch_first": cpu_threads._state.torch_was_loaded}}))
"""


@pytest.mark.slow
def test_a_fresh_process_gets_the_policy_before_torch_loads():
    out = _fresh(PROBE.format(imports="import verl, torch"))
    assert out["seen"] == {"GOMP_SPINCOUNT": "1000", "OMP_WAIT_POLICY": "", "KMP_BLOCKTIME": "1"}
    assert out["torch_first"] is False
    if out["quota"] is not None:  # the count follows the quota
        assert out["threads"] == out["usable"]
    else:  # no quota: torch's own default, the same count (and bits) as before the policy
        assert out["threads"] == _fresh(PROBE.format(imports="import verl, torch"), VERL_THREAD_POLICY="off")["threads"]


@pytest.mark.slow
def test_a_fresh_process_keeps_the_user_s_choice_or_the_old_behaviour():
    out = _fresh(PROBE.format(imports="import verl, torch"), OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1")
    assert out["seen"] == {"GOMP_SPINCOUNT": "", "OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": ""}
    assert out["threads"] == 1
    out = _fresh(PROBE.format(imports="import verl, torch"), VERL_THREAD_POLICY="off")
    assert out["seen"] == {"GOMP_SPINCOUNT": "", "OMP_WAIT_POLICY": "", "KMP_BLOCKTIME": ""}


@pytest.mark.slow
def test_torch_imported_first_is_noticed():
    out = _fresh(PROBE.format(imports="import torch, verl"))
    assert out["torch_first"] is True  # the variables are set for children; this process's runtime kept its own


# the main job, 2 threads, 2 steps, validation and checkpoints off
JOB = [
    "trainer.total_training_steps=2",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=-1",
    "trainer.logger=[file]",
    "trainer.resume_mode=disable",
]


@pytest.mark.slow
def test_the_wait_policy_does_not_change_the_bits(tmp_path):
    """Same bits on CPU: the main job with 2 threads under verl's short spin, a passive policy and libgomp's default
    spin (the policy off) logs the same losses, rewards, gradient norms and every other non-timing metric, exactly.
    The wait policy only decides whether a waiting thread spins or sleeps, never how work is split."""
    results = []
    waits = {"policy": {}, "passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "off": {"VERL_THREAD_POLICY": "off"}}
    for name, env in waits.items():
        out = tmp_path / name
        cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *JOB, f"trainer.default_local_dir={out}"]
        full_env = _clean_env() | {"OMP_NUM_THREADS": "2"} | env
        proc = subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-3000:]
        with open(out / "metrics.jsonl") as f:
            rows = [{k: v for k, v in json.loads(line).items() if not k.startswith(WALL_CLOCK)} for line in f]
        results.append(rows)
    assert len(results[0]) == 2 and any("actor/pg_loss" in r for r in results[0])
    assert results[1] == results[0] and results[2] == results[0]
