"""The ``verl`` command and every job's ``--help`` / ``--cfg job``: a newcomer can explore without running anything."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from verl.cli import COMMANDS
from verl.utils.cli import job_config, job_help

JOBS = {
    "ppo": ("verl.trainer.main_ppo", "ppo_trainer"),
    "sft": ("verl.trainer.main_sft", "sft_trainer"),
    "eval": ("verl.trainer.main_eval", "evaluation"),
    "generate": ("verl.trainer.main_generation", "generation"),
}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)


def test_verl_lists_every_job_and_each_maps_to_its_module():
    out = _run("-m", "verl.cli", "--help")
    assert out.returncode == 0
    for name in ("ppo", "sft", "eval", "generate", "tune", "merge", "tasks"):
        assert f"  {name} " in out.stdout and name in COMMANDS
    assert {name: COMMANDS[name][0] for name in JOBS} == {name: module for name, (module, _) in JOBS.items()}
    bad = _run("-m", "verl.cli", "nope")
    assert bad.returncode != 0 and "unknown command 'nope'" in bad.stderr


@pytest.mark.parametrize("name", sorted(JOBS))
def test_help_lists_the_sections_and_the_reference(name, capsys):
    module, job = JOBS[name]
    assert job_config(job, ["--help"], module, "the summary") is None
    text = capsys.readouterr().out
    assert text.startswith(f"usage: python -m {module}") and "docs/config_reference.md" in text
    assert "the summary" in text and "--cfg job" in text


@pytest.mark.slow
def test_help_of_a_section_lists_its_keys_with_defaults():
    text = job_help("ppo_trainer", "verl ppo", "", section="algorithm.kl_ctrl")
    assert "algorithm.kl_ctrl.kl_coef=0.001" in text and "the KL coefficient" in text
    assert "no config section or key 'nope'" in job_help("ppo_trainer", "verl ppo", "", section="nope")


@pytest.mark.slow
def test_verl_subcommand_equals_python_m_and_cfg_job_prints_without_running(tmp_path):
    via_verl = _run("-m", "verl.cli", "ppo", "--cfg", "job", "trainer.seed=5", f"trainer.default_local_dir={tmp_path}")
    via_module = _run(
        "-m", "verl.trainer.main_ppo", "trainer.seed=5", "--cfg", "job", f"trainer.default_local_dir={tmp_path}"
    )
    assert via_verl.returncode == via_module.returncode == 0, via_verl.stderr + via_module.stderr
    assert via_verl.stdout == via_module.stdout
    printed = yaml.safe_load(via_verl.stdout)
    assert (
        printed["trainer"]["seed"] == 5
        and printed["critic"]["model"]["path"] == printed["actor_rollout_ref"]["model"]["path"]
    )
    assert not any(tmp_path.iterdir())  # nothing ran: no run directory content
    helped = _run("-m", "verl.cli", "sft", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: verl sft")


@pytest.mark.slow
def test_bad_argument_names_the_fix():
    out = _run("-m", "verl.trainer.main_eval", "--bogus")
    assert out.returncode != 0 and "write overrides as key.path=value" in out.stderr and "--help" in out.stderr
