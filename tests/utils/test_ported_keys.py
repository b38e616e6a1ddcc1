"""Scripts written for public verl run here: its keys load, the deprecated ones map as in verl, and a value this
version cannot honour warns (same algorithm) or is an error naming the key (another algorithm)."""

import importlib.util
import logging

import pytest
import torch

from verl.trainer.main_ppo import check_config, warn_unimplemented_choices
from verl.utils.config import ConfigError, load_config, merge_config, replace_keys, to_yaml
from verl.utils.ported_keys import ERROR_UNLESS, WARN_UNLESS, apply_deprecated_micro_batch_sizes, apply_ported_keys

# the keys of verl's quickstart (docs/start/quickstart) and examples/grpo_trainer/run_qwen2-7b.sh, as their users type them
VERL_QUICKSTART = [
    "data.train_files=builtin://arithmetic/train",
    "data.val_files=builtin://arithmetic/test",
    "data.train_batch_size=256",
    "data.max_prompt_length=512",
    "data.max_response_length=512",
    "actor_rollout_ref.model.path=builtin://tiny-qwen2-arith-sft",
    "actor_rollout_ref.actor.optim.lr=1e-6",
    "actor_rollout_ref.actor.ppo_mini_batch_size=64",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
    "critic.optim.lr=1e-5",
    "critic.model.path=builtin://tiny-qwen2-arith-sft",
    "critic.ppo_micro_batch_size_per_gpu=4",
    "algorithm.kl_ctrl.kl_coef=0.001",
    "trainer.logger=console",
    "trainer.val_before_train=False",
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    "trainer.save_freq=10",
    "trainer.test_freq=10",
    "trainer.total_epochs=15",
]
VERL_GRPO_EXTRA = [
    "algorithm.adv_estimator=grpo",
    "data.filter_overlong_prompts=True",
    "data.truncation=error",
    "actor_rollout_ref.model.use_remove_padding=True",
    "actor_rollout_ref.actor.use_kl_loss=True",
    "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
    "actor_rollout_ref.actor.entropy_coeff=0",
    "actor_rollout_ref.model.enable_gradient_checkpointing=True",
    "actor_rollout_ref.actor.fsdp_config.param_offload=False",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.mode=async",
    "actor_rollout_ref.rollout.enforce_eager=False",
    "actor_rollout_ref.rollout.free_cache_engine=False",
    "actor_rollout_ref.rollout.n=5",
    "actor_rollout_ref.ref.fsdp_config.param_offload=True",
    "actor_rollout_ref.actor.checkpoint.save_contents=['model','optimizer','extra']",
    "actor_rollout_ref.model.trust_remote_code=False",
    "algorithm.use_kl_in_reward=False",
    "trainer.critic_warmup=0",
    "trainer.logger=['console','wandb']",
    "trainer.project_name=verl_grpo_example_gsm8k",
    "trainer.experiment_name=qwen2_7b_function_rm",
    "trainer.default_hdfs_dir=null",
    "critic.model.use_remove_padding=True",
    "critic.use_dynamic_bsz=True",
    "reward_model.model.fsdp_config.param_offload=True",
    "data.dataloader_num_workers=0",
    "ray_init.num_cpus=null",
]


def test_verl_quickstart_and_grpo_example_keys_load_and_pass_the_checks():
    config = load_config("ppo_trainer", VERL_QUICKSTART + VERL_GRPO_EXTRA)  # ported keys applied as it loads
    if importlib.util.find_spec("vllm") is None:  # verl's examples roll out with vLLM: without it, one clear error
        with pytest.raises(ConfigError, match="rollout.name=vllm but vLLM is not installed: pip install vllm"):
            check_config(config)
        config = replace_keys(config, {"actor_rollout_ref.rollout.name": "hf"})
    check_config(config)
    messages = warn_unimplemented_choices(config)
    # epochs are not what sets the length here, said once; nothing else warns
    assert [m.split("=")[0] for m in messages] == ["trainer.total_epochs"]
    assert "total_training_steps=null" in messages[0]
    assert config.actor_rollout_ref.rollout.gpu_memory_utilization == 0.4


def test_default_config_warns_about_nothing():
    assert warn_unimplemented_choices(load_config("ppo_trainer")) == []


def test_rollout_mode_async_runs_without_a_warning_and_another_mode_is_an_error():
    config = load_config("ppo_trainer", ["actor_rollout_ref.rollout.mode=async"])
    check_config(config)
    assert warn_unimplemented_choices(config) == []
    with pytest.raises(
        ConfigError, match=r"actor_rollout_ref\.rollout\.mode=server: the rollout modes are sync and async"
    ):
        check_config(load_config("ppo_trainer", ["actor_rollout_ref.rollout.mode=server"]))


def test_deprecated_global_micro_batch_sizes_split_over_the_workers_as_in_verl(caplog):
    config = merge_config(  # the merged DictConfig that load_config's PREPARE step (apply_ported_keys) changes
        "ppo_trainer",
        [
            "actor_rollout_ref.actor.ppo_micro_batch_size=64",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size=96",
            "critic.ppo_micro_batch_size=8",
            "trainer.backend=ray",
            "trainer.n_gpus_per_node=2",
        ],
    )
    with caplog.at_level(logging.WARNING):
        messages = apply_deprecated_micro_batch_sizes(config)
    assert config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 32  # 64 // 2 workers
    assert config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 48
    assert config.critic.ppo_micro_batch_size_per_gpu == 4
    assert config.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu == 128  # not given: the default stays
    assert len(messages) == 3 and "set actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu instead" in messages[0]
    assert "deprecated" in caplog.text

    too_small = ["actor_rollout_ref.actor.ppo_micro_batch_size=1", "trainer.n_gpus_per_node=2"]
    with pytest.raises(ConfigError, match="ppo_micro_batch_size=1 .* 2 workers"):
        apply_deprecated_micro_batch_sizes(merge_config("ppo_trainer", too_small))
    with pytest.raises(ConfigError, match="ppo_micro_batch_size=1 .* 2 workers"):
        load_config("ppo_trainer", too_small)  # load_config runs it


@pytest.mark.parametrize(
    "override, key",
    [
        ("actor_rollout_ref.actor.ulysses_sequence_parallel_size=2", "ulysses_sequence_parallel_size"),
        ("actor_rollout_ref.model.use_liger=True", "use_liger"),
        ("actor_rollout_ref.actor.fsdp_config.fsdp_size=4", "fsdp_size"),
        ("trainer.default_hdfs_dir=hdfs://x/y", "default_hdfs_dir"),
        ("actor_rollout_ref.model.use_fused_kernels=True", "use_fused_kernels"),
    ],
)
def test_values_with_the_same_algorithm_warn_and_name_what_runs(override, key):
    config = load_config("ppo_trainer", [override])
    check_config(config)  # not an error: the run is the same algorithm
    messages = warn_unimplemented_choices(config)
    assert len(messages) == 1 and key in messages[0]


@pytest.mark.parametrize(
    "override",
    [
        "actor_rollout_ref.rollout.enable_rollout_routing_replay=True",
        "algorithm.use_pf_ppo=True",
        "data.custom_cls.path=my_dataset.py",
    ],
)
def test_values_that_change_the_algorithm_are_errors_naming_the_key(override):
    key = override.split("=")[0]
    assert key in [k for k, _, _ in ERROR_UNLESS]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        check_config(load_config("ppo_trainer", [override]))


@pytest.mark.slow
@pytest.mark.parametrize(
    "override",
    [
        "actor_rollout_ref.model.custom_chat_template='{{ messages }}'",
        "actor_rollout_ref.actor.router_replay.mode=R2",
        "actor_rollout_ref.rollout.over_sample_rate=0.1",
        "actor_rollout_ref.actor.optim.optimizer=AdamW8bit",
        "data.apply_chat_template_kwargs={enable_thinking: false}",
    ],
)
def test_newer_verl_keys_that_would_change_the_run_are_errors_naming_the_key(override):
    key = override.split("=")[0]
    assert key in [k for k, _, _ in ERROR_UNLESS]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        check_config(load_config("ppo_trainer", [override]))


@pytest.mark.parametrize(
    "override",
    ["actor_rollout_ref.model.lora_rank=8", "critic.model.lora_rank=8", "actor_rollout_ref.model.lora_adapter_path=a"],
)
def test_lora_keys_run_and_are_no_ported_key_error(override):
    config = load_config("ppo_trainer", [override])
    check_config(config)  # LoRA runs (verl.utils.lora): neither an error nor a warning
    assert warn_unimplemented_choices(config) == []


@pytest.mark.parametrize(
    "override",
    [
        "algorithm.rollout_correction.rollout_is=sequence",
        "algorithm.rollout_correction.rollout_rs=token_k1",
        "algorithm.rollout_correction.bypass_mode=true",
    ],
)
def test_rollout_correction_runs_and_is_no_ported_key_error(override):
    """rollout_is / rollout_rs and bypass mode run (docs/rollout.md)."""
    assert override.split("=")[0] not in [k for k, _, _ in ERROR_UNLESS]
    config = load_config(
        "ppo_trainer",
        [
            override,
            "algorithm.rollout_correction.rollout_rs_threshold=0.5_2.0",
            "actor_rollout_ref.rollout.calculate_log_probs=true",
        ],
    )
    check_config(config)
    assert warn_unimplemented_choices(config) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "override",
    [
        "actor_rollout_ref.actor.profiler.enable=true",
        "global_profiler.tool=nsys",
        "actor_rollout_ref.ref.fsdp_config.ulysses_sequence_parallel_size=2",
        "actor_rollout_ref.model.tokenizer_path=/models/tok",
        "actor_rollout_ref.rollout.skip_rollout=true",
        "transfer_queue.enable=true",
        "actor_rollout_ref.nccl_timeout=1200",
    ],
)
def test_newer_verl_keys_with_the_same_algorithm_warn_once(override):
    key = override.split("=")[0]
    assert key in [k for k, _, _ in WARN_UNLESS]
    config = load_config("ppo_trainer", [override])
    check_config(config)
    messages = warn_unimplemented_choices(config)
    assert len(messages) == 1 and messages[0].startswith(key)


def test_a_reward_manager_named_in_either_place_runs_without_a_warning():
    config = load_config("ppo_trainer", ["reward_model.reward_manager=dapo"])
    assert config.reward_manager.name == "dapo"  # verl's newer key follows the older one
    check_config(config)
    assert warn_unimplemented_choices(config) == []


def test_derived_keys_follow_their_source_and_another_value_is_named():
    assert load_config("ppo_trainer", ["actor_rollout_ref.rollout.n=4"]).critic.rollout_n == 4
    with pytest.raises(
        ConfigError, match="actor_rollout_ref.actor.rollout_n=2 differs from actor_rollout_ref.rollout.n=8"
    ):
        check_config(load_config("ppo_trainer", ["actor_rollout_ref.actor.rollout_n=2"]))
    config = load_config("ppo_trainer", ["actor_rollout_ref.actor.use_remove_padding=false"])
    check_config(config)  # packed or padded: the same math, so a warning
    messages = warn_unimplemented_choices(config)
    assert len(messages) == 1 and "follow actor_rollout_ref.model.use_remove_padding" in messages[0]


def test_optim_clip_grad_is_an_error_unless_the_roles_grad_clip_holds_it():
    with pytest.raises(ConfigError, match="set actor_rollout_ref.actor.grad_clip=0.5"):
        check_config(load_config("ppo_trainer", ["actor_rollout_ref.actor.optim.clip_grad=0.5"]))
    both = ["critic.optim.clip_grad=0.5", "critic.grad_clip=0.5"]
    check_config(load_config("ppo_trainer", both))


def test_older_spellings_map_onto_the_keys_that_run(caplog):
    argv = [
        "actor_rollout_ref.actor.optim.warmup_style=cosine",
        "ray_kwargs.ray_init.num_cpus=3",
        "ray_kwargs.ray_init.runtime_env={env_vars: {A: '1'}}",
        "ray_kwargs.timeline_json_file=/tmp/t.json",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=null",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=null",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true",
        "critic.ppo_micro_batch_size=8",
    ]
    config = merge_config("ppo_trainer", argv)  # the DictConfig that load_config's PREPARE step changes
    with caplog.at_level(logging.WARNING):
        messages = apply_ported_keys(config)
    optim = config.actor_rollout_ref.actor.optim
    assert optim.lr_scheduler_type == "cosine" and optim.warmup_style is None
    assert config.ray_init.num_cpus == 3 and config.ray_init.timeline_json_file == "/tmp/t.json"
    assert config.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu == 128
    assert config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 128  # unused: token budgets
    # the deprecated global size maps and is cleared, so the section holds one of the two as verl's dataclass needs
    assert config.critic.ppo_micro_batch_size is None and config.critic.ppo_micro_batch_size_per_gpu == 8
    assert config.critic.forward_micro_batch_size_per_gpu == 8  # it followed ppo_micro_batch_size: no own warning
    assert [m.split("=")[0] for m in messages] == [
        "critic.ppo_micro_batch_size",
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        "actor_rollout_ref.actor.optim.warmup_style",
        "ray_kwargs.ray_init.runtime_env",
    ]
    assert all(m in caplog.text for m in messages)
    assert to_yaml(load_config("ppo_trainer", argv)) == to_yaml(config)  # what load_config returns: these keys


def test_ignore_eos_samples_to_the_response_length():
    from verl.protocol import DataProto
    from verl.utils.dataset.parquet import prompt_to_messages, read_parquet_rows, render_prompt
    from verl.utils.model import load_causal_lm, load_tokenizer
    from verl.workers.rollout.hf_rollout import HFRollout

    path = "builtin://tiny-qwen2-arith-sft"
    tokenizer, model = load_tokenizer(path), load_causal_lm(path)
    rows = read_parquet_rows("builtin://arithmetic/test")[:4]
    texts = [render_prompt(tokenizer, prompt_to_messages(r.data["prompt"], r)) for r in rows]
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    pos = (enc["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    prompts = DataProto.from_dict(
        {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "position_ids": pos}
    )
    lengths = {}
    for ignore in (False, True):
        config = {"response_length": 24, "do_sample": False, "ignore_eos": ignore}
        rollout = HFRollout(model, config, tokenizer.pad_token_id, tokenizer.eos_token_id, seed=0)
        out = rollout.generate_sequences(prompts)
        lengths[ignore] = out.batch["response_mask"].sum(-1)
    assert (lengths[False] < 24).all()  # the warm start answers and stops
    assert torch.equal(lengths[True], torch.full_like(lengths[True], 24))  # ignore_eos: sampled to the end


def test_external_lib_is_imported_and_a_missing_one_is_named(tmp_path, monkeypatch):
    from verl.utils.model import import_external_lib

    marker = tmp_path / "imported.txt"
    (tmp_path / "my_model_registry.py").write_text(f"open({str(marker)!r}, 'w').write('yes')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import_external_lib("my_model_registry")
    assert marker.read_text() == "yes"
    with pytest.raises(ImportError, match="external_lib='no_such_registry_pkg'"):
        import_external_lib("no_such_registry_pkg")


@pytest.mark.slow
def test_rollout_and_validation_data_dirs_hold_every_sample_of_each_step(tmp_path):
    import json

    from verl.trainer.main_ppo import main

    main(
        [
            "data.train_files=builtin://arithmetic/train?train_size=16",
            "data.val_files=builtin://arithmetic/test?test_size=6",
            "data.train_batch_size=4",
            "data.val_batch_size=4",  # two validation batches: both land in one file
            "actor_rollout_ref.rollout.n=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=4",
            "trainer.total_training_steps=2",
            "trainer.test_freq=2",
            "trainer.logger=[file]",
            f"trainer.default_local_dir={tmp_path / 'run'}",
            f"trainer.rollout_data_dir={tmp_path / 'rollouts'}",
            f"trainer.validation_data_dir={tmp_path / 'val'}",
        ]
    )
    for step in (1, 2):
        rows = [json.loads(line) for line in open(tmp_path / "rollouts" / f"{step}.jsonl")]
        assert len(rows) == 4 * 2 and {r["step"] for r in rows} == {step}
        assert all(isinstance(r["input"], str) and isinstance(r["output"], str) for r in rows)
        assert all(r["score"] in (0.0, 1.0) for r in rows)  # the arithmetic rule's scores
    assert sorted(p.name for p in (tmp_path / "val").iterdir()) == ["0.jsonl", "2.jsonl"]
    assert len(open(tmp_path / "val" / "2.jsonl").readlines()) == 6


@pytest.mark.slow
def test_val_only_validates_once_and_trains_nothing(tmp_path):
    import json

    from verl.trainer.main_ppo import main

    result = main(
        [
            "data.val_files=builtin://arithmetic/test?test_size=16",
            "trainer.val_only=true",
            "trainer.logger=[file]",
            f"trainer.default_local_dir={tmp_path}",
        ]
    )
    assert result["global_steps"] == 0
    assert [step for step, _ in result["history"]["val-core/acc"]] == [0]
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert len(rows) == 1 and "val-core/acc" in rows[0]
    assert not any(p.name.startswith("global_step_") for p in tmp_path.iterdir())  # no training, no checkpoint


# ------------------------------------------------------------------------------------------------------------- SFT
VERL_SFT = [
    "data.train_files=builtin://arithmetic/train",
    "data.val_files=builtin://arithmetic/test",
    "data.prompt_key=extra_info",
    "data.response_key=extra_info",
    "optim.lr=1e-4",
    "data.prompt_dict_keys=['question']",
    "+data.response_dict_keys=['answer']",
    "data.micro_batch_size_per_gpu=4",
    "model.partial_pretrain=builtin://tiny-qwen2",
    "trainer.project_name=gsm8k-sft",
    "trainer.experiment_name=gsm8k-sft-qwen-2.5-0.5b-instruct",
    "trainer.logger=console",
    "trainer.total_epochs=1",
    "use_remove_padding=true",
]


def test_verl_sft_keys_load_and_name_the_nested_columns():
    from verl.utils.ported_keys import check_sft_ported_keys, sft_column_paths

    config = load_config("sft_trainer", VERL_SFT)
    assert check_sft_ported_keys(config) == []
    assert sft_column_paths(config) == ("extra_info.question", "extra_info.answer")
    assert sft_column_paths(load_config("sft_trainer")) == ("prompt", "extra_info.answer")  # this version's default
    warned = check_sft_ported_keys(load_config("sft_trainer", [*VERL_SFT, "ulysses_sequence_parallel_size=2"]))
    assert len(warned) == 1 and "ulysses_sequence_parallel_size=2" in warned[0]


@pytest.mark.parametrize(
    "override, env, match",
    [
        ("trainer.n_gpus_per_node=8", {}, r"trainer\.n_gpus_per_node=8: SFT runs in one process"),
        ("trainer.seed=1", {"WORLD_SIZE": "2"}, r"WORLD_SIZE=2: SFT runs in one process"),
    ],
)
def test_sft_values_this_version_cannot_run_are_errors(override, env, match, monkeypatch):
    from verl.utils.ported_keys import check_sft_ported_keys

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match=match):
        check_sft_ported_keys(load_config("sft_trainer", [*VERL_SFT, override]))


def test_custom_reward_function_reward_kwargs_reach_the_function(tmp_path):
    from verl.trainer.main_ppo import build_reward_fns

    (tmp_path / "my_reward.py").write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None, penalty=0.0, bonus=0.0):\n"
        "    return penalty + bonus\n"
    )
    config = load_config(
        "ppo_trainer",
        [
            f"custom_reward_function.path={tmp_path / 'my_reward.py'}",
            "+custom_reward_function.reward_kwargs.penalty=-0.2",
            "+reward_model.reward_kwargs.bonus=1.0",
        ],
    )
    reward_fn, _ = build_reward_fns(config, tokenizer=None)
    assert reward_fn.compute_score("arithmetic", "x", "1", None, **reward_fn.reward_kwargs) == pytest.approx(0.8)
    defaults, _ = build_reward_fns(load_config("ppo_trainer"), tokenizer=None)
    assert defaults.reward_kwargs == {}  # none given: none passed


def test_verl_helper_names_scripts_import():
    from verl.utils import hf_tokenizer
    from verl.utils.model import compute_position_id_with_mask

    tokenizer = hf_tokenizer("builtin://tiny-qwen2-arith-sft")
    assert tokenizer.padding_side == "left" and tokenizer.pad_token_id is not None
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    assert compute_position_id_with_mask(mask).tolist() == [[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]]


@pytest.mark.slow
def test_train_and_val_max_samples_limit_the_datasets():
    from verl.trainer.main_ppo import build_dataset
    from verl.utils.model import load_tokenizer

    tokenizer = load_tokenizer("builtin://tiny-qwen2-arith-sft")
    files = ["builtin://arithmetic/test"]  # 200 rows

    def questions(*overrides, key="data.train_files"):
        ds = build_dataset(load_config("ppo_trainer", list(overrides)), files, tokenizer, key=key)
        return [item["extra_info"]["question"] for item in ds.items]

    everything = questions()
    assert len(everything) == 200
    first = questions("data.train_max_samples=10", "data.shuffle=false")
    assert first == everything[:10]  # not shuffled: the first rows, as verl
    drawn = questions("data.train_max_samples=10")  # shuffled (the default): a seeded subset in file order
    assert len(drawn) == 10 and drawn != first and drawn == questions("data.train_max_samples=10")
    assert drawn == sorted(drawn, key=everything.index)
    assert len(questions("data.val_max_samples=7", key="data.val_files")) == 7
    assert len(questions("data.val_max_samples=7")) == 200  # the training split ignores the validation limit
