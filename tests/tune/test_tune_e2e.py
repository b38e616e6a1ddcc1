"""Real studies on the built-in task with tiny budgets: two tuner processes on one storage (with a crashing trial),
a pruned trial, kill -9 of the tuner then resume, the in-process objective(trial) pattern, the report files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import optuna
import pytest

from verl.tune import PruningCallback, run_study, suggest_overrides
from verl.utils.config import load_config

pytestmark = pytest.mark.slow

TINY = [
    "recipe=quickstart",  # the built-in task's settings, also for the trial whose data file does not exist
    "data.train_files=builtin://arithmetic/train?train_size=64",
    "data.val_files=builtin://arithmetic/test?test_size=8",
    "data.train_batch_size=4",
    "data.max_response_length=24",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16",
    "trainer.total_training_steps=1",
    "trainer.test_freq=1",
    "trainer.val_before_train=false",
]
GOOD = "builtin://arithmetic/train?train_size=64"
SPACE = f"""
params:
  actor_rollout_ref.actor.optim.lr: {{type: float, low: 1.0e-4, high: 1.0e-3, log: true}}
  data.train_files: ["{GOOD}", "/nonexistent/train.parquet"]
"""


def tune_cmd(out, *extra):
    return [
        sys.executable,
        "-m",
        "verl.trainer.main_tune",
        "--search-space",
        str(out / "space.yaml"),
        "--output-dir",
        str(out),
        "--no-progress",
        *extra,
        *TINY,
    ]


def states(study):
    return [t.state.name for t in study.trials]


def test_two_workers_one_storage_with_crashing_trial(tmp_path):
    """Two tuner processes share one SQLite study; the trial pointed at a missing file fails with its error tail
    while the study goes on; the report is complete and the best config runs as --config."""
    (tmp_path / "space.yaml").write_text(SPACE)
    storage = f"sqlite:///{tmp_path}/study.db"
    study = optuna.create_study(storage=storage, study_name="ppo-tune", direction="maximize")
    for lr, files in [(3e-4, GOOD), (5e-4, "/nonexistent/train.parquet"), (2e-4, GOOD)]:
        study.enqueue_trial({"actor_rollout_ref.actor.optim.lr": lr, "data.train_files": files})
    cmd = tune_cmd(tmp_path, "--n-trials", "3", "--pruner", "none", "--storage", storage)
    procs = [
        subprocess.Popen(
            cmd + (["--no-report"] if i else []), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    if not all(p.returncode == 0 for p in procs):
        pytest.fail("tuner exit codes {}:\n{}".format([p.returncode for p in procs], "\n----\n".join(outs)))
    study = optuna.load_study(study_name="ppo-tune", storage=storage)
    reasons = {
        t.number: (t.state.name, t.user_attrs.get("fail_reason"), t.user_attrs.get("error_tail", "")[-1500:])
        for t in study.trials
    }
    # the three queued trials (numbers 0-2) ran as queued; two workers racing for the last queued trial may add one
    # sampled trial (--n-trials counts per study, and a worker that lost the race already asked for a trial)
    if states(study)[:3] != ["COMPLETE", "FAIL", "COMPLETE"] or len(study.trials) > 4:
        pytest.fail(f"trial states: {reasons}\ntuner outputs: {outs}")
    assert len({t.user_attrs["worker"]["pid"] for t in study.trials}) == 2  # both workers ran trials
    failed = study.trials[1]
    assert "nonexistent" in failed.user_attrs["fail_reason"] and "nonexistent" in failed.user_attrs["error_tail"]
    for t in study.trials:
        d = t.user_attrs["trial_dir"]
        assert os.path.exists(os.path.join(d, "config.yaml")) and os.path.exists(os.path.join(d, "train.log"))
    summary = json.loads((tmp_path / "best_params.json").read_text())
    assert summary["best_trial"] in (0, 2, 3)
    cfg = load_config("ppo_trainer", ["--config", summary["best_config"]])
    assert cfg.actor_rollout_ref.actor.optim.lr == summary["best_params"]["actor_rollout_ref.actor.optim.lr"]
    assert "| FAIL |" in (tmp_path / "trials.md").read_text()
    assert (tmp_path / "trials.csv").read_text().count("\n") >= 4  # header + the queued trials
    for png in ("optimization_history.png", "intermediate_values.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pruned_trial(tmp_path):
    """A pruner that prunes any value below 1.01 ends the trainer at its first validation."""
    (tmp_path / "space.yaml").write_text(SPACE.replace(', "/nonexistent/train.parquet"', ""))
    res = run_study(
        search_space=str(tmp_path / "space.yaml"),
        base_overrides=[*TINY, "trainer.total_training_steps=200"],  # far more than pruning lets it run
        n_trials=1,
        pruner="threshold:1.01",
        output_dir=str(tmp_path),
        progress=False,
        seed=0,
    )
    t = res.study.trials[0]
    assert t.state.name == "PRUNED" and t.user_attrs["pruned_at_step"] == 1 and t.intermediate_values
    steps = [json.loads(x)["step"] for x in open(os.path.join(t.user_attrs["trial_dir"], "metrics.jsonl"))]
    assert max(steps) < 200  # killed long before finishing


def test_kill_9_then_resume(tmp_path):
    (tmp_path / "space.yaml").write_text(SPACE.replace(', "/nonexistent/train.parquet"', ""))
    cmd = tune_cmd(tmp_path, "--n-trials", "1", "--seed", "3", "--no-report", "trainer.total_training_steps=3")
    tuner = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pid_file = tmp_path / "trial_0" / "trial.pid"
    deadline = time.time() + 120
    while not (pid_file.exists() and pid_file.stat().st_size) and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(2)  # the trainer is running
    trainer_pid = json.loads(pid_file.read_text())["pid"]
    os.kill(tuner.pid, signal.SIGKILL)
    tuner.wait()
    for _ in range(50):  # the trainer dies with its tuner
        try:
            os.kill(trainer_pid, 0)
            with open(f"/proc/{trainer_pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.1)
        except ProcessLookupError:
            break
    else:
        pytest.fail("trainer outlived its tuner")
    study = optuna.load_study(study_name="ppo-tune", storage=f"sqlite:///{tmp_path}/study.db")
    assert states(study) == ["RUNNING"]
    out = subprocess.run(cmd[:-1] + ["trainer.total_training_steps=1"], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    study = optuna.load_study(study_name="ppo-tune", storage=f"sqlite:///{tmp_path}/study.db")
    assert states(study) == ["FAIL", "COMPLETE"]
    assert "interrupted" in study.trials[0].user_attrs["fail_reason"]
    assert study.trials[1].user_attrs["retry_of"] == 0 and study.trials[1].params == study.trials[0].params


def test_in_process_objective_pattern(tmp_path):
    """An Optuna-style objective(trial) (docs/tune.md): sample, train in-process with a pruning callback, return a
    metric."""
    from verl.trainer.main_ppo import run_ppo

    def objective(trial):
        cfg = load_config(
            "ppo_trainer",
            [
                *TINY,
                f"trainer.default_local_dir={tmp_path}/t{trial.number}",
                "trainer.logger=[file]",
                *suggest_overrides(trial),
            ],
        )
        cb = PruningCallback(trial, "val-core/acc")
        result = run_ppo(cfg, callbacks=[cb])
        cb.raise_if_pruned()
        return result["val"]["val-core/acc"]

    res = run_study(objective=objective, n_trials=1, output_dir=str(tmp_path), progress=False, seed=0)
    t = res.study.trials[0]
    assert t.state.name == "COMPLETE" and 0.0 <= t.value <= 1.0 and 1 in t.intermediate_values
    assert set(t.params) >= {"actor_rollout_ref.actor.optim.lr", "algorithm.reward_temp"}


WORKER = """
import sys, time
from verl.tune import run_study

def objective(trial):
    x = trial.suggest_float("x", -1.0, 1.0)
    y = trial.suggest_int("y", 0, 3)
    if y == 3 and trial.number % 2:
        raise RuntimeError("deliberate crash")
    time.sleep(0.2)
    return [1.0 - x * x, float(y) + x]

run_study(objective=objective, metrics=["score", "cost"], directions=["maximize", "minimize"], n_trials=int(sys.argv[2]),
          storage=sys.argv[1], study_name=sys.argv[5], output_dir=sys.argv[3], progress=False, report=sys.argv[4] == "1")
"""


PG_URL = os.environ.get("VERL_TEST_POSTGRES_URL", "postgresql+psycopg2://verl:verl@localhost/optuna")


def _postgres_or_skip() -> str:
    try:
        import sqlalchemy

        sqlalchemy.create_engine(PG_URL).connect().close()
    except Exception as e:  # no driver or no server: .ci/run starts one (docs/tune.md#postgresql)
        pytest.skip(f"no PostgreSQL at {PG_URL}: {type(e).__name__}")
    return PG_URL


@pytest.mark.parametrize("backend", ["journal", "postgresql"])
def test_shared_storage_two_processes_multi_objective(tmp_path, backend):
    """Two script processes share a journal-file study (the Python API with your own objective, one trial in two
    crashing); the multi-objective report has the Pareto front and its plot."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    storage = f"journal:{tmp_path}/journal.log" if backend == "journal" else _postgres_or_skip()
    name = f"mo-{os.getpid()}-{time.time_ns()}"
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), storage, "8", str(tmp_path), str(int(i == 0)), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    from verl.tune import make_storage

    study = optuna.load_study(study_name=name, storage=make_storage(storage, str(tmp_path)))
    finished = [t for t in study.trials if t.state.name in ("COMPLETE", "FAIL")]
    assert 8 <= len(finished) <= 9 and len({t.user_attrs["worker"]["pid"] for t in study.trials}) == 2
    from verl.tune.report import write_report
    from verl.tune.study import Objective

    summary = write_report(study, str(tmp_path), Objective(["score", "cost"], ["maximize", "minimize"]))
    assert summary["pareto_front"] and summary["plots"]["pareto_front.png"] == "ok"
    assert (tmp_path / "pareto_front.png").read_bytes()[:4] == b"\x89PNG"
