"""trainer.backend=ray on this CPU machine: two worker processes (gloo, FSDP2) against the single-process run.

Every run is a real CLI subprocess that starts its own local Ray cluster inside the run directory and shuts it
down. HOME points at an empty directory to check that nothing is written outside the run directory, and no Ray
process may outlive a run. Same seed, same results on CPU -- on one process or two: sampling is keyed by sample
index, each optimizer mini-batch is split across workers, and losses are normalised over the whole mini-batch.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

import pytest

pytest.importorskip("ray", reason="the Ray backend needs ray: pip install 'ray[default]'")

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BASE = [
    "data.train_files=builtin://arithmetic/train?train_size=64",
    "data.val_files=builtin://arithmetic/test?test_size=16",
    "data.train_batch_size=8",
    "data.max_response_length=24",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",  # 2 optimizer steps per training step
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",  # 2 micro-batches per mini-batch in one process
    "critic.ppo_micro_batch_size_per_gpu=8",
    "trainer.test_freq=3",
    "trainer.logger=[file]",
]
RAY2 = ["trainer.backend=ray", "trainer.n_gpus_per_node=2"]


def run(tmp_path, name: str, *extra: str, check: bool = True, popen: bool = False):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
    argv = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        *BASE,
        f"trainer.default_local_dir={tmp_path / name}",
        *extra,
    ]
    if popen:
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def metrics(run_dir) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        row = json.loads(line)
        out.setdefault(row["step"], {}).update(row)
    return out


def assert_same_run(a: dict, b: dict, steps) -> None:
    """Same samples exactly; scores, losses and gradient norms within float tolerance (summation order). A reward
    model's score is a float whose rounding depends on its batch's shape on some CPUs (an AVX2-only EPYC gave
    -0.0025560767 against -0.0025560779 at step 2, where AVX-512 machines agreed exactly)."""
    for step in steps:
        for key in ("response_length/mean", "val-core/acc"):
            if key in a[step]:
                assert a[step][key] == b[step][key], (step, key)
        assert b[step]["critic/score/mean"] == pytest.approx(a[step]["critic/score/mean"], rel=1e-6, abs=1e-8)
        for key, value in a[step].items():
            if key.startswith(("actor/", "critic/")) and isinstance(value, float):
                assert b[step][key] == pytest.approx(value, rel=1e-3, abs=1e-5), (step, key)


def ray_processes() -> set[str]:
    """pid + command line of every Ray process on the machine (raylet, GCS, workers, dashboard agents)."""
    ps = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout.splitlines()
    return {line.strip() for line in ps if any(k in line for k in ("raylet", "gcs_server", "ray::", "ray/_private"))}


def started_by(line: str, tmp_path) -> bool:
    """Whether the process of ``ps`` line ``line`` belongs to this test's Ray: its session (logs included) lives
    under ``tmp_path``, and every Ray daemon and worker keeps files open there, orphaned ones too. Another test's or
    another session's Ray has its files elsewhere. (The environment is no guide: a long process title overwrites it.)"""
    root, fd_dir = os.path.realpath(tmp_path), f"/proc/{line.split()[0]}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:  # it exited meanwhile (or is not ours to read)
        return False
    for fd in fds:
        try:
            if os.readlink(os.path.join(fd_dir, fd)).startswith(root):
                return True
        except OSError:
            continue
    return False


def run_until_checkpointed(tmp_path, *args: str) -> tuple[subprocess.Popen, Any]:
    """A run started in the background, returned once its first checkpoint is committed (with the file saying so)."""
    proc = run(tmp_path, "run", *args, popen=True)
    latest = tmp_path / "run" / "latest_checkpointed_iteration.txt"
    deadline = time.time() + 300
    while not latest.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert latest.exists(), proc.communicate()[1][-3000:]
    return proc, latest


def before_run() -> tuple[set[str], set[str]]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "verl-ray-*"))), ray_processes()


def no_ray_left(tmp_path, before: tuple[set[str], set[str]]) -> None:
    links, procs = before
    assert not os.listdir(tmp_path / "home"), "something was written under HOME"
    new_links = set(glob.glob(os.path.join(tempfile.gettempdir(), "verl-ray-*"))) - links
    # this run's links point into its tmp_path (another test's Ray may run beside it under pytest-xdist)
    assert not [link for link in new_links if os.path.realpath(link).startswith(os.path.realpath(tmp_path))]
    for _ in range(50):  # Ray's last processes exit asynchronously after the driver
        left = {line for line in ray_processes() - procs if started_by(line, tmp_path)}
        if not left:
            break
        time.sleep(0.1)
    assert not left, f"Ray processes outlived the run: {left}"


@pytest.mark.parametrize("estimator", ["grpo", "gae"])
def test_two_ray_workers_match_one_process_and_checkpoints_reshard(tmp_path, estimator):
    """GRPO: actor + rollout + reference (KL loss) and a reward model colocated in the 2 worker processes, with
    token-budget micro-batches and shared-prompt passes. GAE: the critic on a resource pool of its own (one process)."""
    from verl.models.tiny import save_tiny_classifier

    before = before_run()
    common = [f"algorithm.adv_estimator={estimator}", "trainer.total_training_steps=3", "trainer.save_freq=2"]
    if estimator == "grpo":
        rm_dir = save_tiny_classifier(str(tmp_path / "rm"), labels=("score",))
        common += ["actor_rollout_ref.actor.use_kl_loss=true", "reward_model.enable=true"]
        common += [f"reward_model.model.path={rm_dir}"]
        # token-budget micro-batches: ranks must agree on their count (FSDP), and the loss weights stay exact
        common += [
            "actor_rollout_ref.actor.use_dynamic_bsz=true",
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=300",
        ]
        common += ["actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true"]
        # each prompt computed once per micro-batch: two forwards (prompt, responses) before one FSDP2 backward
        common += ["actor_rollout_ref.model.use_shared_prefix=true"]
        common += ["actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=300"]
        placement = []
    else:
        placement = ["critic.enable_resource_pool=true", "critic.n_gpus_per_node=1"]
    run(tmp_path, "local", *common)
    proc = run(tmp_path, "ray", *common, *RAY2, *placement)
    assert f"ray backend: {3 if placement else 2} worker processes" in proc.stdout
    local, ray2 = metrics(tmp_path / "local"), metrics(tmp_path / "ray")
    assert_same_run(local, ray2, steps=[1, 2, 3])
    assert 0 < ray2[1]["perf/ray_overhead_fraction"] < 1
    assert ray2[1]["timing_s/reshard"] > 0  # the rollout gathered the sharded weights

    # every worker holds about half of the parameters and of the optimizer state (per-worker metrics)
    workers = [w for w in json.load(open(tmp_path / "ray" / "workers.json")) if w["pool"] == "global_pool"]
    assert [w["rank"] for w in workers] == [0, 1]
    full = workers[0]["memory"]["actor_rollout"]["full_param_bytes"]
    for w in workers:
        assert w["memory"]["actor_rollout"]["param_bytes"] == pytest.approx(full / 2, rel=0.05)
    for kind in ("param", "optim_state"):
        key = f"perf/actor_{kind}_mb"
        assert ray2[3][key] == pytest.approx(local[3][key] / 2, rel=0.05), key
        if estimator == "gae":  # the critic's own pool has one process: it holds everything
            key = f"perf/critic_{kind}_mb"
            assert ray2[3][key] == pytest.approx(local[3][key], rel=0.01), key
    if estimator == "grpo":
        assert ray2[1]["actor/kl_loss"] == pytest.approx(local[1]["actor/kl_loss"], abs=1e-7)
    assert local[3]["perf/actor_optim_state_mb"] == pytest.approx(2 * local[3]["perf/actor_param_mb"], rel=0.01)
    assert set(os.listdir(tmp_path / "ray" / "global_step_2" / "actor" / "dcp")) >= {".metadata"}

    # the 2-worker checkpoint of step 2 loads in one process (resharded) and gives the same step 3
    resume = ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={tmp_path / 'ray' / 'global_step_2'}"]
    run(tmp_path, "resumed", *common, *resume)
    assert_same_run(ray2, metrics(tmp_path / "resumed"), steps=[3])
    no_ray_left(tmp_path, before)


def test_lora_two_ray_workers_match_one_process_and_adapter_checkpoints_reshard(tmp_path):
    """LoRA on the actor (its base is the reference of the KL loss) and on the critic: FSDP2 shards the adapters
    with the rest, the HF sampler's replica gets merged weights, and the adapter-only checkpoint of the 2-worker run
    resumes in one process with the same next step."""
    pytest.importorskip("peft", reason="LoRA needs peft: pip install peft")
    before = before_run()
    common = ["algorithm.adv_estimator=gae", "trainer.total_training_steps=3", "trainer.save_freq=2"]
    common += ["actor_rollout_ref.model.lora_rank=8", "critic.model.lora_rank=8"]
    common += ["actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.optim.lr=1e-3"]
    run(tmp_path, "local", *common)
    run(tmp_path, "ray", *common, *RAY2)
    local, ray2 = metrics(tmp_path / "local"), metrics(tmp_path / "ray")
    assert_same_run(local, ray2, steps=[1, 2, 3])
    assert (
        ray2[3]["actor/kl_loss"] == pytest.approx(local[3]["actor/kl_loss"], rel=1e-3) and local[3]["actor/kl_loss"] > 0
    )
    assert ray2[1]["timing_s/reshard"] > 0
    for kind in ("param", "optim_state"):  # each worker holds half of the base and of the adapters' state
        key = f"perf/actor_{kind}_mb"
        assert ray2[3][key] == pytest.approx(local[3][key] / 2, rel=0.05), key
    assert local[3]["perf/actor_optim_state_mb"] < 0.3 * local[3]["perf/actor_param_mb"]  # adapters only
    ckpt = tmp_path / "ray" / "global_step_2"
    assert sorted(os.listdir(ckpt / "actor")) == ["dcp", "extra_state.pt", "lora_adapter"]
    assert sorted(os.listdir(ckpt / "critic")) == ["dcp", "extra_state.pt", "lora_adapter"]
    resume = ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={ckpt}"]
    run(tmp_path, "resumed", *common, *resume)
    assert_same_run(ray2, metrics(tmp_path / "resumed"), steps=[3])
    no_ray_left(tmp_path, before)


def test_bypass_mode_on_two_ray_workers_matches_one_process(tmp_path):
    """verl's bypass mode: the actor's bypass loss reaches the remote workers with its settings (REINFORCE with
    token weights), no worker runs the old-log-prob pass, and the two-process run is the one-process run."""
    before = before_run()
    common = [
        "trainer.total_training_steps=2",
        "trainer.test_freq=-1",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
    ]
    common += ["algorithm.rollout_correction.bypass_mode=true", "algorithm.rollout_correction.loss_type=reinforce"]
    common += ["algorithm.rollout_correction.rollout_is=token"]
    run(tmp_path, "local", *common)
    run(tmp_path, "ray", *common, *RAY2)
    local, ray2 = metrics(tmp_path / "local"), metrics(tmp_path / "ray")
    assert_same_run(local, ray2, steps=[1, 2])
    for step in (1, 2):
        assert ray2[step]["timing_s/old_log_prob"] < 0.01 and "rollout_corr/rollout_is_mean" in ray2[step]
        assert ray2[step]["rollout_corr/rollout_is_mean"] == pytest.approx(local[step]["rollout_corr/rollout_is_mean"])
    no_ray_left(tmp_path, before)


def test_a_killed_worker_names_itself_and_the_run_resumes(tmp_path):
    before = before_run()
    # 12 steps: the kill lands right after the step-2 checkpoint, long before the end; the resume trains the rest
    # (40 took over 10 minutes on a loaded 2-core machine)
    args = ["trainer.total_training_steps=12", "trainer.save_freq=2", "trainer.test_freq=-1", *RAY2]
    proc, latest = run_until_checkpointed(tmp_path, *args)
    victim = next(w for w in json.load(open(tmp_path / "run" / "workers.json")) if w["rank"] == 1)
    os.kill(victim["pid"], signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert f"worker process of role 'actor_rollout' rank 1 of 2 (pid {victim['pid']}" in err, err[-3000:]
    assert "died during" in err and "run the same command again" in err
    assert "Traceback" not in err  # one clear error line, not a stack
    saved = int(latest.read_text())
    assert saved >= 2

    again = run(tmp_path, "run", *args)
    assert f"resumed from {tmp_path / 'run' / f'global_step_{saved}'}" in again.stdout
    assert max(metrics(tmp_path / "run")) == 12
    no_ray_left(tmp_path, before)


SEPARATE = ["trainer.v1.trainer_mode=separate_async", "trainer.v1.separate_async.parameter_sync_step=2"]


@pytest.mark.parametrize("partial, lora", [(0, False), (2, False), (0, True)])
def test_separate_async_replica_in_its_own_pool_gives_the_bits_of_colocate_async(tmp_path, partial, lora):
    """``trainer.backend=ray trainer.n_gpus_per_node=1 trainer.v1.trainer_mode=separate_async``: one trainer process
    and one standalone rollout replica, one core each; under ``trainer.deterministic=true`` the logical schedule gives
    every metric of the in-process ``colocate_async`` run at the same lag (one torch thread each), with partial
    rollout too (the replica resumes each cut trajectory under the next version), and with a LoRA policy, whose
    replica gets the frozen base once and then each version's adapters alone; nothing is left running."""
    before = before_run()
    steps = ["trainer.total_training_steps=3", "trainer.save_freq=-1", f"trainer.v1.partial_rollout_tokens={partial}"]
    if lora:
        steps += ["actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora_alpha=16"]
    ray1 = ["trainer.backend=ray", "trainer.n_gpus_per_node=1", "trainer.deterministic=true"]  # the logical schedule
    separate = run(tmp_path, "separate", *steps, *SEPARATE, *ray1)
    workers = json.load(open(tmp_path / "separate" / "workers.json"))
    assert sorted((w["roles"][0], w["pool"]) for w in workers) == [
        ("actor_rollout", "global_pool"),
        ("rollout_replica", "rollout_pool"),
    ]
    colocated = run(tmp_path, "colocated", *steps, "trainer.v1.trainer_mode=colocate_async", "trainer.num_threads=1")
    a, b = metrics(tmp_path / "colocated"), metrics(tmp_path / "separate")
    wall = ("timing_s/", "async/", "timing_per_token_ms/", "perf/", "time")
    for step in range(4):
        assert {k: v for k, v in a[step].items() if not k.startswith(wall)} == {
            k: v for k, v in b[step].items() if not k.startswith(wall)
        }, step
    staleness = [b[s]["training/off_policy/trajectory_staleness/max"] for s in (1, 2, 3)]
    assert staleness == ([0, 0, 0] if partial else [0, 1, 1])  # partial: every trajectory ends under the newest
    assert [b[s]["training/off_policy/trajectory_spans/max"] for s in (1, 2, 3)] == ([1, 2, 2] if partial else [1] * 3)
    assert "held-out greedy accuracy" in separate.stdout and "held-out greedy accuracy" in colocated.stdout
    sent = [b[s]["async/update_weights_mb"] for s in (1, 2, 3)]
    if lora:  # the base (and the first adapters) at step 1, then adapters alone: under a tenth of it
        assert sent[0] > 0 and 0 < sent[1] < sent[0] / 10 and sent[2] == 0  # step 3 asks for no new batch
    no_ray_left(tmp_path, before)


def test_separate_async_killed_replica_names_itself_and_the_run_resumes(tmp_path):
    before = before_run()
    args = ["trainer.total_training_steps=8", "trainer.save_freq=2", "trainer.test_freq=-1", *SEPARATE]
    args += ["trainer.backend=ray", "trainer.n_gpus_per_node=1"]
    proc, latest = run_until_checkpointed(tmp_path, *args)
    victim = next(w for w in json.load(open(tmp_path / "run" / "workers.json")) if w["roles"] == ["rollout_replica"])
    os.kill(victim["pid"], signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert f"worker process of role 'rollout_replica' rank 0 of 1 (pid {victim['pid']}" in err, err[-3000:]
    assert "run the same command again" in err and "Traceback" not in err
    saved = int(latest.read_text())
    again = run(tmp_path, "run", *args)
    assert f"resumed from {tmp_path / 'run' / f'global_step_{saved}'}" in again.stdout
    assert max(metrics(tmp_path / "run")) == 8
    no_ray_left(tmp_path, before)


@pytest.mark.parametrize("strategy, threshold, partial", [("drop", 0, 0), ("wait", 1, 4)])
def test_streaming_separate_async_never_trains_beyond_the_threshold(tmp_path, strategy, threshold, partial):
    """The wall-clock schedule: the replica streams prompt groups one batch ahead while the trainer trains. With
    ``drop`` at threshold 0 every group sampled before the last update is evicted and refilled (nothing older is
    ever trained); with ``wait`` at 1 no group is trained more than one version after its first token, also when
    partial rollout resumes a trajectory under newer versions (4 tokens per segment)."""
    before = before_run()
    sampler = [f"trainer.v1.partial_rollout_tokens={partial}", f"trainer.v1.sampler.max_off_policy_strategy={strategy}"]
    sampler += [f"trainer.v1.sampler.max_off_policy_threshold={threshold}"]
    lag = f"trainer.v1.separate_async.num_warmup_batches={max(threshold, 1) if strategy == 'wait' else 1}"
    args = ["trainer.total_training_steps=4", "trainer.save_freq=-1", *SEPARATE, *sampler, lag]
    run(tmp_path, "stream", *args, "trainer.backend=ray", "trainer.n_gpus_per_node=1")
    rows = metrics(tmp_path / "stream")
    assert max(rows) == 4
    for step in (1, 2, 3, 4):
        assert rows[step]["training/off_policy/trajectory_staleness_worst/max"] <= threshold, (step, rows[step])
        spans = rows[step]["training/off_policy/trajectory_spans/max"]
        assert spans == 1 if not partial else 1 <= spans <= 2  # without partial rollout a group has one version
    dropped = sum(rows[s]["async/groups_dropped_stale"] for s in (1, 2, 3, 4))
    assert dropped > 0 if strategy == "drop" else dropped == 0
    no_ray_left(tmp_path, before)


TOOL_TASK = [
    "actor_rollout_ref.model.path=builtin://tiny-qwen2-calc-sft",
    "actor_rollout_ref.rollout.mode=async",
    "actor_rollout_ref.rollout.multi_turn.enable=true",
    "actor_rollout_ref.rollout.multi_turn.tool_config_path=examples/agent_loop/tool_configs/calculator.yaml",
    "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
    "data.train_files=builtin://calc_multiply/train?train_size=64",
    "data.val_files=builtin://calc_multiply/test?size=8",
    "data.max_prompt_length=96",
    "data.max_response_length=64",
    "trainer.total_training_steps=2",
    "trainer.test_freq=2",
    "trainer.save_freq=-1",
    "trainer.val_before_train=false",
]


def test_separate_async_runs_the_agent_loop_on_its_replica(tmp_path):
    """The built-in tool task (the calculator, with the shipped tool-calling warm start) in ``separate_async``: the
    replica process runs the agent loop, tools included, for the training batches and for validation (the
    trainer's processes serve no per-request generate on Ray). Under ``trainer.deterministic=true`` the same seed
    gives the same trajectories, scores and losses (the agent loop's seed keys come from a generator of the
    schedule's own: Ray's driver draws from Python's global one), and nothing is left running."""
    before = before_run()
    args = [*TOOL_TASK, *SEPARATE, "trainer.backend=ray", "trainer.n_gpus_per_node=1", "trainer.deterministic=true"]
    first, second = run(tmp_path, "a", *args), run(tmp_path, "b", *args)
    a, b = metrics(tmp_path / "a"), metrics(tmp_path / "b")
    skip = ("timing_s/", "async/", "timing_per_token_ms/", "perf/", "time")
    skip += ("agent_loop/tool_latency", "agent_loop/generate_seq", "agent_loop/tool_calls/")
    for step in (1, 2):
        assert {k: v for k, v in a[step].items() if not k.startswith(skip)} == {
            k: v for k, v in b[step].items() if not k.startswith(skip)
        }, step
    assert a[2]["agent_loop/num_tool_calls/mean"] > 0  # the replica really called the calculator
    assert any(k.startswith("val-core/") for k in a[2])  # validated through the replica's agent loop
    assert "held-out greedy accuracy" in first.stdout and "held-out greedy accuracy" in second.stdout
    no_ray_left(tmp_path, before)


def test_streaming_separate_async_overlaps_the_agent_loops_of_several_chunks(tmp_path):
    """The wall clock with the agent loop and a slow tool (the calculator waiting 0.3-0.6 s a call): the feeder keeps
    every chunk alive in flight at once on the one replica (its calls run concurrently, their turns on one event
    loop), so tool waits overlap; each group is tagged with the versions the replica really sampled it with, and
    nothing is trained past the threshold."""
    before = before_run()
    slow = tmp_path / "slow_calculator.yaml"
    slow.write_text(
        open(os.path.join(ROOT, "examples/agent_loop/tool_configs/slow_calculator.yaml"))
        .read()
        .replace("latency_s: [0.2, 3.0]", "latency_s: [0.3, 0.6]")
    )
    args = [*TOOL_TASK, *SEPARATE, "trainer.backend=ray", "trainer.n_gpus_per_node=1", "trainer.test_freq=-1"]
    args += [
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={slow}",
        "trainer.v1.sampler.max_off_policy_threshold=1",
    ]
    args += ["trainer.v1.sampler.max_off_policy_strategy=wait"]
    proc = run(tmp_path, "stream", *args)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]  # no feeder thread died along the way
    rows = metrics(tmp_path / "stream")
    # (1 + lag) x 8 prompts alive, in chunks of 4: up to 4 chunks in flight at once, after the first step too (the
    # feeders once shared an idle clock, and all but one died on it after the first batch)
    assert rows[1]["async/chunks_in_flight_max"] > 1 and rows[2]["async/chunks_in_flight_max"] > 1
    for step in (1, 2):
        assert rows[step]["training/off_policy/trajectory_staleness_worst/max"] <= 1
        assert rows[step]["agent_loop/num_tool_calls/mean"] >= 0
    assert (
        max(rows[s]["agent_loop/tool_latency_s/max"] for s in (1, 2) if "agent_loop/tool_latency_s/max" in rows[s])
        >= 0.3
    )
    no_ray_left(tmp_path, before)


def test_a_killed_driver_leaves_no_ray_process_and_the_run_resumes(tmp_path):
    """kill -9 of the controller itself (the ``main_ppo`` process): Ray's GCS and raylet follow it, and the reaper
    started beside the cluster kills the raylet's agents (measured to linger over a minute without it) and removes
    the session's symlink within seconds; the rerun resumes from the last checkpoint to the end."""
    before = before_run()
    args = ["trainer.total_training_steps=6", "trainer.save_freq=2", "trainer.test_freq=-1", *SEPARATE]
    args += ["trainer.backend=ray", "trainer.n_gpus_per_node=1"]
    proc, latest = run_until_checkpointed(tmp_path, *args)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    deadline = time.time() + 15
    while time.time() < deadline and {line for line in ray_processes() - before[1] if started_by(line, tmp_path)}:
        time.sleep(0.2)
    no_ray_left(tmp_path, before)  # (it also waits a few seconds)
    saved = int(latest.read_text())
    again = run(tmp_path, "run", *args)
    assert f"resumed from {tmp_path / 'run' / f'global_step_{saved}'}" in again.stdout
    assert max(metrics(tmp_path / "run")) == 6
    no_ray_left(tmp_path, before)
