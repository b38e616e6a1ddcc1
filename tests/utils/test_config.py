import pytest

from verl.utils.config import ConfigError, load_config, parse_overrides


def test_defaults_overrides_and_files(tmp_path):
    f = tmp_path / "my.yaml"
    f.write_text("optim:\n  lr: 1e-4\ntrainer:\n  seed: 7\n")
    cfg = load_config("sft_trainer", ["--config", str(f), "trainer.seed=9", "data.train_files=[a.parquet,b.parquet]"])
    assert cfg.optim.lr == 1e-4  # YAML 1.1 reads 1e-4 as a string; a float key still takes it
    assert cfg.trainer.seed == 9  # the command line beats the file
    assert list(cfg.data.train_files) == ["a.parquet", "b.parquet"]
    assert cfg.trainer.default_local_dir == "checkpoints/gsm8k-sft/test"  # interpolation resolved (verl's names)


@pytest.mark.parametrize(
    "args, message",
    [
        (["optim.lrr=1"], "unknown config key 'optim.lrr'. Did you mean 'optim.lr'"),
        (["trainer.lr=1"], "Did you mean 'optim.lr'"),
        (["trainer.seed=abc"], "'trainer.seed' expects an integer"),
        (["trainer.logger={a: 1}"], "'trainer.logger' expects a list"),
        (["data.max_length=[1,2]"], "'data.max_length' expects an integer"),
        (["optim.lr.x=1"], "'optim.lr' is a value, not a group"),
        (["nonsense"], "write overrides as key.path=value"),
        (["--config"], "needs a YAML file path"),
    ],
)
def test_bad_keys_and_types_fail_naming_the_key(args, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_config("sft_trainer", args)


def test_bad_config_file(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("trainer:\n  totl_epochs: 3\n")
    with pytest.raises(ConfigError, match=r"config file .*bad.yaml.*'trainer\.totl_epochs'.*'trainer\.total_epochs'"):
        load_config("sft_trainer", ["--config", str(f)])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("sft_trainer", ["--config", str(tmp_path / "missing.yaml")])


def test_plus_adds_new_keys_and_null_is_accepted():
    cfg = load_config("sft_trainer", ["+model.extra.rank=8", "trainer.total_training_steps=null"])
    # an added key is an attribute of its typed section; a group added under it is a plain dict
    assert cfg.model.extra["rank"] == 8 and cfg.trainer.total_training_steps is None
    assert parse_overrides(["a.b=1.5", "+c=x"])[1] == [("a.b", 1.5, False), ("c", "x", True)]


@pytest.mark.slow
def test_null_default_keys_still_have_a_type():
    from verl.utils.config import ConfigError, load_config

    for arg, expected in (
        ("data.seed=abc", "'data.seed' expects an integer"),
        ("trainer.max_actor_ckpt_to_keep=two", "expects an integer"),
        ("actor_rollout_ref.ref.enable=maybe", "expects a boolean"),
        ("actor_rollout_ref.actor.optim.betas=[0.9,abc]", "expects a list of numbers"),
    ):
        with pytest.raises(ConfigError, match=expected):
            load_config("ppo_trainer", [arg])
    cfg = load_config(
        "ppo_trainer", ["data.seed=3", "actor_rollout_ref.ref.enable=true", "trainer.max_actor_ckpt_to_keep=2"]
    )
    assert (cfg.data.seed, cfg.actor_rollout_ref.ref.enable, cfg.trainer.max_actor_ckpt_to_keep) == (3, True, 2)
    assert load_config(
        "ppo_trainer", ["actor_rollout_ref.actor.optim.betas=[0.9,1]"]
    ).actor_rollout_ref.actor.optim.betas == [0.9, 1]


def test_an_emptied_group_in_a_file_changes_nothing_but_null_on_the_command_line_is_an_error(tmp_path):
    from verl.utils.config import ConfigError, load_config

    path = tmp_path / "c.yaml"
    path.write_text("data:\n  # train_batch_size: 32\ntrainer:\n  total_training_steps: 5\n")
    cfg = load_config("ppo_trainer", ["--config", str(path)])
    assert cfg.data.train_batch_size == 64 and cfg.trainer.total_training_steps == 5
    with pytest.raises(ConfigError, match="'trainer' is a group of keys"):
        load_config("ppo_trainer", ["trainer=null"])


def test_a_number_for_a_string_key_is_its_text():
    from verl.utils.config import load_config

    assert load_config("ppo_trainer", ["trainer.experiment_name=2024"]).trainer.experiment_name == "2024"


def test_interpolations_in_overrides_resolve_and_are_type_checked():
    from verl.utils.config import ConfigError, load_config

    cfg = load_config("ppo_trainer", ["data.max_response_length=${data.max_prompt_length}"])
    assert cfg.data.max_response_length == cfg.data.max_prompt_length == cfg.actor_rollout_ref.rollout.response_length
    with pytest.raises(ConfigError, match="expects an integer, but its interpolation resolves to str"):
        load_config("ppo_trainer", ["data.max_response_length=${trainer.project_name}"])
    with pytest.raises(ConfigError, match="interpolation does not resolve: Interpolation key 'data.nope'"):
        load_config("ppo_trainer", ["data.max_response_length=${data.nope}"])


def test_a_list_of_specs_with_query_strings_is_a_list():
    # YAML reads "?" in a flow sequence as a key marker and fails; the command line means a list of strings
    cfg = load_config("ppo_trainer", ["data.train_files=[builtin://arithmetic/train?train_size=64,b.parquet]"])
    assert list(cfg.data.train_files) == ["builtin://arithmetic/train?train_size=64", "b.parquet"]


def test_as_section_converts_once_and_passes_typed_sections_through():
    """The one conversion at a function's boundary: typed in, the same object out; a dict or None, the schema's
    section with the schema's defaults (nulls where the schema has none mean "not set"); an unknown key fails."""
    from omegaconf import OmegaConf

    from verl.trainer.config.algorithm import AlgoConfig, RolloutCorrectionConfig
    from verl.utils.config import as_section
    from verl.workers.config.actor import ActorConfig, FSDPActorConfig

    typed = FSDPActorConfig()
    loaded = load_config("ppo_trainer").actor_rollout_ref.actor  # a DictConfig built from the schema
    assert as_section(typed, ActorConfig) is typed and as_section(loaded, ActorConfig) is loaded
    assert as_section(None, AlgoConfig) == AlgoConfig()
    algo = as_section(OmegaConf.create({"gamma": 0.9, "lam": None}), AlgoConfig)
    assert isinstance(algo, AlgoConfig) and (algo.gamma, algo.lam, algo.gdpo_reward_keys) == (0.9, 1.0, None)
    with pytest.raises(ConfigError, match="AlgoConfig: Key 'gama'"):
        as_section({"gama": 0.9}, AlgoConfig)
    # the actor's ported dict layout: policy_loss options at the top level, clip_ratio_low/high following clip_ratio
    actor = as_section({"clip_ratio": 0.3, "clip_ratio_high": 0.4, "dro_beta": 0.1}, ActorConfig)
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.policy_loss.dro_beta) == (0.3, 0.4, 0.1)
    bypass = as_section({"policy_loss": {"rollout_correction": {"loss_type": "reinforce"}}}, ActorConfig)
    assert bypass.policy_loss.rollout_correction == RolloutCorrectionConfig(loss_type="reinforce")


def test_as_section_loads_a_job_dict_with_its_derived_keys():
    from verl.trainer.config.ppo_trainer import PPOTrainerConfig
    from verl.utils.config import as_section

    job = as_section({"reward_model": {"reward_manager": "dapo"}}, PPOTrainerConfig)
    assert job.reward_manager.name == "dapo" and job.data.reward_fn_key == "data_source"
    loaded = load_config("ppo_trainer")
    assert as_section(loaded, PPOTrainerConfig) is loaded
