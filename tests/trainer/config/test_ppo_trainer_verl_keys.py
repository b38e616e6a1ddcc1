"""The ppo_trainer schema accepts every leaf key of public verl's PPO config, with verl's defaults: the legacy
single-file ``ppo_trainer.yaml`` and the current composed one. The key lists are fixtures generated from verl's files
(``scripts/verl_config_keys.py extract``; the command and source commit are in each fixture's header)."""

import importlib.util
import logging
import os

import pytest
import yaml

from verl.trainer.config.checks import check_ppo_config
from verl.utils.config import ConfigError, load_config, merge_config, select
from verl.utils.ported_keys import apply_ported_keys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
PACKAGED = os.path.join(ROOT, "verl", "trainer", "config")  # the current key list ships: docs mark verl's defaults
# fixture file, verl's file it lists, its number of leaf keys
VERL_FILES = [
    (
        "verl_legacy_ppo_trainer_keys.yaml",
        "715724c88fdc5d70bfafc9ff152b9260b41c2892:verl/trainer/config/ppo_trainer",
        289,
    ),
    ("verl_ppo_trainer_keys.yaml", "b178a3cd56f58b2d502255daba591e92833930a7:verl/trainer/config/_generated", 507),
]


def _script():
    spec = importlib.util.spec_from_file_location(
        "verl_config_keys", os.path.join(ROOT, "scripts", "verl_config_keys.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _quiet_ported_key_warnings():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.slow
@pytest.mark.parametrize("fixture, source, count", VERL_FILES)
def test_every_verl_key_loads_alone_with_its_verl_default(fixture, source, count):
    path = os.path.join(FIXTURES if "legacy" in fixture else PACKAGED, fixture)
    with open(path) as f:
        assert source in f.readline()  # the header names the commit and file it was generated from
    keys = _script().load_fixture(path)
    assert len(keys) == count
    assert _script().rejected(keys) == []  # 100%: each key=value as a command-line override


@pytest.mark.parametrize("fixture, source, count", VERL_FILES)
def test_a_whole_verl_file_loads_as_one_config_file(fixture, source, count):
    config = merge_config(  # the merged DictConfig, before load_config's PREPARE step (apply_ported_keys) ran
        "ppo_trainer", ["--config", os.path.join(FIXTURES if "legacy" in fixture else PACKAGED, fixture)]
    )
    messages = apply_ported_keys(config)
    # verl's defaults: gae, one response per prompt, a null micro-batch size taking this version's default
    assert config.algorithm.adv_estimator == "gae" and config.actor_rollout_ref.actor.rollout_n == 1
    assert config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 128
    assert any("ppo_micro_batch_size_per_gpu=null" in m for m in messages)
    assert config.actor_rollout_ref.actor.optim.lr_scheduler_type == "constant"
    # verl's 8 GPUs per node need the ray backend here: one clear error, not a crash
    with pytest.raises(ConfigError, match="trainer.n_gpus_per_node=8"):
        check_ppo_config(config)


def test_the_checker_reports_a_rejected_key_and_the_share(tmp_path, capsys):
    fixture = tmp_path / "keys.yaml"
    fixture.write_text(yaml.safe_dump({"trainer.seed": 3, "trainer.no_such_key": 1, "ray_init.num_cpus": None}))
    assert _script().main(["check", str(fixture)]) == 1
    out = capsys.readouterr().out
    assert "2/3 keys accepted (66.7%)" in out and "rejected trainer.no_such_key" in out


def test_extract_lists_leaves_with_their_values_and_leaves_out_targets():
    text = "a:\n  _target_: x.Y\n  b: 1\n  c: {}\n  d:\n    e: [1, 2]\n  f: 'true'\n  g: ${a.b}\n"
    fixture = yaml.safe_load(_script().extract(text, source="test"))
    assert fixture == {"a.b": 1, "a.c": {}, "a.d.e": [1, 2], "a.f": "true", "a.g": "${a.b}"}
    assert _script().as_override("a.f", "true") == "a.f='true'"  # parses back to the string
    overrides = [_script().as_override(k, v) for k, v in (("x", None), ("y", []), ("z", {}))]
    assert overrides == ["x=null", "y=[]", "z={}"]


def test_omegaconf_missing_marker_keeps_the_default():
    config = load_config("ppo_trainer", ["reward_model.rollout.name=???"])
    assert select(config, "reward_model.rollout.name") == "hf"


@pytest.mark.slow
def test_loading_the_schema_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys; from verl.utils.config import load_config; load_config('ppo_trainer'); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"  # --help and --cfg job stay fast: the sections' checks import lazily
