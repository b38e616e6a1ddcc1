"""The SFT job's verl keys take verl's defaults; our tuned values for the built-in task live in the ``sft_quickstart``
recipe.

verl's defaults come from the key lists of its two SFT jobs shipped beside the schema: the current one
(``verl/trainer/config/verl_sft_trainer_keys.yaml``) and, for the keys only it has, the legacy one
(``verl_sft_trainer_legacy_keys.yaml``), each composed with its defaults list. A key
whose default differs must be listed, with its reason, in ``SFT_VERL_DEFAULT_EXCEPTIONS``.
"""

from __future__ import annotations

import os

import pytest
import yaml

from verl.trainer.config import sft_trainer
from verl.utils.config import ConfigError, load_config, recipe_path
from verl.utils.config_reference import verl_default_differences, verl_defaults

CONFIG_DIR = os.path.dirname(sft_trainer.__file__)


def test_every_verl_key_has_verl_default_or_an_argued_exception():
    unlisted = {
        k: v
        for k, v in verl_default_differences("sft_trainer").items()
        if k not in sft_trainer.SFT_VERL_DEFAULT_EXCEPTIONS
    }
    assert not unlisted, "defaults that differ from verl's without a reason in SFT_VERL_DEFAULT_EXCEPTIONS:\n" + (
        "\n".join(f"  {k}: ours {m!r}, verl {t!r}" for k, (m, t) in unlisted.items())
    )


def test_no_stale_exception():
    stale = sorted(set(sft_trainer.SFT_VERL_DEFAULT_EXCEPTIONS) - set(verl_default_differences("sft_trainer")))
    assert not stale, f"listed as exceptions but equal to verl's default (remove them): {stale}"


@pytest.mark.parametrize(
    "fixture, source, count",
    [
        (
            "verl_sft_trainer_keys.yaml",
            "b178a3cd56f58b2d502255daba591e92833930a7:verl/trainer/config/sft_trainer_engine",
            121,
        ),
        (
            "verl_sft_trainer_legacy_keys.yaml",
            "b178a3cd56f58b2d502255daba591e92833930a7:verl/trainer/config/sft_trainer.",
            72,
        ),
    ],
)
def test_the_shipped_key_lists_name_their_source(fixture, source, count):
    with open(os.path.join(CONFIG_DIR, fixture)) as f:
        assert source in f.readline()  # the header names the commit and file it was generated from
        f.seek(0)
        assert len(yaml.safe_load(f)) == count


def test_where_verl_s_two_configs_disagree_the_current_one_wins():
    defaults = verl_defaults("sft_trainer")
    assert defaults["optim.lr"] == 1e-3 and defaults["optim.betas"] == [0.9, 0.999]  # legacy: 1e-5, [0.9, 0.95]
    assert defaults["trainer.n_gpus_per_node"] == 1  # legacy: 8
    assert defaults["model.partial_pretrain"] == "~/models/gemma-1.1-7b-it"  # only the legacy layout has it


def test_a_run_on_its_own_model_and_data_takes_verl_s_defaults():
    cfg = load_config("sft_trainer", ["model.partial_pretrain=/models/mine", "data.train_files=/d/train.parquet"])
    assert cfg.recipe == "none"
    assert cfg.optim.lr == 1e-3 and cfg.optim.betas == [0.9, 0.999] and cfg.optim.min_lr_ratio == 0.0
    assert cfg.data.train_batch_size == 256 and cfg.data.micro_batch_size_per_gpu == 4 and cfg.data.max_length == 1024
    assert (cfg.data.prompt_key, cfg.data.response_key) == ("question", "answer")
    assert cfg.model.enable_gradient_checkpointing and cfg.trainer.total_epochs == 4


def test_the_bare_job_is_the_sft_quickstart_recipe():
    cfg = load_config("sft_trainer")
    assert cfg.recipe == "sft_quickstart"
    with open(recipe_path("sft_quickstart", "sft_trainer")) as f:
        recipe = yaml.safe_load(f)
    assert cfg.optim.lr == recipe["optim"]["lr"] == 3e-3
    assert cfg.model.partial_pretrain == "builtin://tiny-qwen2" and cfg.data.train_files == [
        "builtin://arithmetic/train"
    ]
    assert (cfg.data.train_batch_size, cfg.data.micro_batch_size_per_gpu, cfg.trainer.total_epochs) == (64, 64, 10)
    assert cfg.trainer.default_local_dir == "outputs/verl-sft/arithmetic-tiny-qwen2"
    # built-in models and data are the built-in task too (the multi-turn tool task, say)
    assert load_config("sft_trainer", ["data.train_files=builtin://calc_multiply/train"]).recipe == "sft_quickstart"


def test_a_named_recipe_applies_anywhere_and_recipes_belong_to_their_job():
    cfg = load_config("sft_trainer", ["model.partial_pretrain=/m", "recipe=sft_quickstart", "optim.lr=1e-4"])
    assert cfg.recipe == "sft_quickstart" and cfg.data.train_batch_size == 64
    assert cfg.model.partial_pretrain == "/m" and cfg.optim.lr == 1e-4  # the command line wins
    assert load_config("sft_trainer", ["recipe=none"]).optim.lr == 1e-3
    with pytest.raises(ConfigError, match=r"unknown recipe 'quickstart': one of \['sft_quickstart'\]"):
        load_config("sft_trainer", ["recipe=quickstart"])
    with pytest.raises(ConfigError, match=r"unknown recipe 'sft_quickstart': one of \['quickstart'\]"):
        load_config("ppo_trainer", ["recipe=sft_quickstart"])
