"""Jobs that run model-written code fail closed on a machine without bubblewrap (hidden from the PATH here, as on a
fresh machine): the code-RL job stops at start, before any model loads, with one error naming the data and the fixes;
``sandbox.isolation=rlimit`` is the explicit opt-in that runs. The same for the ``code_interpreter`` tool, a scorer of
the user's own that calls the sandbox, main_eval and code_generation_eval.py; a job that runs no code needs nothing.
docs/security.md."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from verl.sandbox import SandboxUnavailable, run_code
from verl.utils.config import load_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CODE_DATA = [
    "actor_rollout_ref.model.path=builtin://tiny-qwen2-code-sft",
    "data.train_files=builtin://code_functions/train?train_size=64",
    "data.val_files=builtin://code_functions/test?size=8",
    "data.max_prompt_length=160",
    "data.max_response_length=96",
]


@pytest.mark.slow
def test_a_code_job_without_bubblewrap_stops_at_start_naming_the_data_and_the_fixes(without_bwrap, tmp_path):
    from verl.trainer.main_ppo import build_trainer

    config = load_config("ppo_trainer", [*CODE_DATA, f"trainer.default_local_dir={tmp_path}"])
    with pytest.raises(SandboxUnavailable) as stopped:
        build_trainer(config)
    message = str(stopped.value)
    assert (
        "data.train_files: data_source 'code_functions'" in message and "bubblewrap (bwrap) is not installed" in message
    )
    assert "apt-get install bubblewrap" in message and "sandbox.isolation=rlimit" in message
    assert not (tmp_path / "global_step_1").exists()


def test_a_job_that_runs_no_code_needs_no_bubblewrap(without_bwrap):
    from verl.trainer.ppo.code_isolation import resolve_code_isolation

    config = load_config("ppo_trainer")  # the quick start: arithmetic, scored by a rule
    datasets = {"data.train_files": type("D", (), {"items": [{"data_source": "arithmetic"}]})()}
    assert resolve_code_isolation(config, datasets) is None
    # a SandboxFusion service runs the code elsewhere: nothing to isolate here either
    remote = load_config("ppo_trainer", ["reward_model.sandbox_fusion.url=http://127.0.0.1:1/run_code"])
    assert resolve_code_isolation(remote, {"d": type("D", (), {"items": [{"data_source": "apps"}]})()}) is None


@pytest.mark.slow
def test_the_cli_refuses_in_one_line_and_rlimit_opts_in(path_without_bwrap, tmp_path):
    """The README's kind of command on a fresh machine: one error line, exit 1, before the first step; with
    sandbox.isolation=rlimit the same job trains a step and warns that the code is not isolated."""
    env = {**os.environ, "PATH": path_without_bwrap, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    env.pop("VERL_SANDBOX_ISOLATION", None)
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *CODE_DATA, "trainer.total_training_steps=1"]
    refused = subprocess.run(
        [*cmd, f"trainer.default_local_dir={tmp_path / 'a'}"], capture_output=True, text=True, env=env, timeout=600
    )
    assert refused.returncode == 1 and "step 1:" not in refused.stdout
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "sandbox.isolation=rlimit" in errors[0] and "Traceback" not in refused.stderr
    opted = subprocess.run(
        [*cmd, f"trainer.default_local_dir={tmp_path / 'b'}", "sandbox.isolation=rlimit", "trainer.test_freq=-1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert opted.returncode == 0, opted.stderr[-3000:]
    assert "step 1:" in opted.stdout and "SANDBOX WITHOUT ISOLATION (isolation=rlimit)" in opted.stderr


def test_the_code_interpreter_tool_resolves_its_isolation_when_built(without_bwrap):
    from verl.tools.sandbox_fusion_tools import SandboxFusionTool

    with pytest.raises(SandboxUnavailable, match="isolation: rlimit in the tool's config"):
        SandboxFusionTool({})
    with pytest.warns(RuntimeWarning, match="SANDBOX WITHOUT ISOLATION"):
        tool = SandboxFusionTool({"isolation": "rlimit"})
    assert tool.isolation == "rlimit" and tool.execute_code("i", "print(3 * 4)", 5) == ("12\n", "ok")
    assert SandboxFusionTool({"sandbox_fusion_url": "http://127.0.0.1:1/run_code"}).isolation is None


def test_a_scorer_that_calls_the_sandbox_stops_the_run_instead_of_scoring_zeros(without_bwrap):
    """A failing reward function is a failed sample (error_score); a machine that cannot isolate code is not."""
    from verl.protocol import DataProto
    from verl.utils.model import load_tokenizer
    from verl.workers.reward_manager import NaiveRewardManager
    from verl.workers.reward_manager.prime import PrimeRewardManager

    tok = load_tokenizer("builtin://tiny-qwen2-arith-sft")
    responses = torch.tensor([tok("12", add_special_tokens=False)["input_ids"]] * 2)
    batch = DataProto.from_dict(
        {"responses": responses, "response_mask": torch.ones_like(responses)},
        {"data_source": np.array(["mine"] * 2, dtype=object)},
    )

    def runs_the_answer(data_source, solution_str, ground_truth, extra_info=None):
        return float(run_code(f"print({solution_str})").stdout.strip() == "12")

    for manager in (
        NaiveRewardManager(tok, compute_score=runs_the_answer),
        PrimeRewardManager(tok, 0, runs_the_answer),
    ):
        with pytest.raises(SandboxUnavailable, match="bubblewrap"):
            manager(batch)


def test_main_eval_scoring_code_answers_stops_without_bubblewrap_and_runs_with_rlimit(without_bwrap, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from verl.trainer.main_eval import run_eval

    cases = '{"inputs": ["2\\n"], "outputs": ["4\\n"]}'
    rows = [{"data_source": "apps", "responses": ["print(int(input()) * 2)"], "reward_model": {"ground_truth": cases}}]
    path = str(tmp_path / "gen.parquet")
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(SandboxUnavailable):
        run_eval(load_config("evaluation", [f"data.path={path}"]))
    with pytest.warns(RuntimeWarning, match="SANDBOX WITHOUT ISOLATION"):
        result = run_eval(load_config("evaluation", [f"data.path={path}", "sandbox.isolation=rlimit"]))
    assert result["test_score/apps"] == 1.0 and result["errors"] == 0


@pytest.mark.slow
def test_code_generation_eval_refuses_before_loading_the_model(path_without_bwrap, tmp_path):
    env = {**os.environ, "PATH": path_without_bwrap, "PYTHONPATH": ROOT}
    env.pop("VERL_SANDBOX_ISOLATION", None)
    script = os.path.join(ROOT, "examples", "evaluation", "code_generation_eval.py")
    cmd = [sys.executable, script, "--model_path", "/no/model", "--test_set", "x.parquet", "--output", "o.json"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert out.returncode == 1 and out.stderr.startswith("error: ") and "--isolation rlimit" in out.stderr
    assert "/no/model" not in out.stderr
