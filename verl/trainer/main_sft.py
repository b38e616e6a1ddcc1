"""Supervised fine-tuning: the warm start for RL.

    python -m verl.trainer.main_sft                                   # tiny Qwen2 on built-in 2-digit addition
    python -m verl.trainer.main_sft model.partial_pretrain=/models/Qwen2.5-0.5B-Instruct \\
        data.train_files=~/data/gsm8k/train.parquet data.val_files=~/data/gsm8k/test.parquet \\
        data.prompt_key=prompt data.response_key=extra_info.answer optim.lr=1e-5
    python -m verl.trainer.main_sft model.lora_rank=16                # LoRA: trains and saves the adapters alone
    python -m verl.trainer.main_sft data.multiturn.enable=true model.partial_pretrain=builtin://tiny-qwen2?tools=true \\
        data.train_files=builtin://calc_multiply/train data.val_files=builtin://calc_multiply/test?size=100

The bare command and runs on built-in models and data get the ``sft_quickstart`` recipe (the tuned values); a run
on a model or data of its own gets verl's SFT defaults (docs/recipes.md).

Loss on response tokens only (token mean over the global batch), AdamW, warmup + cosine, gradient clipping,
micro-batches with gradient accumulation; validation loss and greedy task accuracy; HF checkpoints. Multi-turn
(``data.multiturn.enable``): whole conversations, loss on the assistant's tokens, accuracy by greedy replay of the
held-out conversations (:mod:`verl.data.multiturn_eval`). LoRA (``model.lora_rank > 0`` or ``model.lora_adapter_path``,
:mod:`verl.utils.lora`): only the adapters train, and each checkpoint is a PEFT adapter directory, which
``PeftModel.from_pretrained(base, dir)`` loads, and so does any model path here (base merged with the adapter) or
``actor_rollout_ref.model.lora_adapter_path`` to go on with RL.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch
from tqdm import tqdm

from verl.data.multiturn_eval import evaluate_replay_success
from verl.trainer.config.sft_trainer import SFTTrainerConfig
from verl.utils.checkpoint import save_hf_checkpoint
from verl.utils.cli import job_config, run_cli
from verl.utils.config import ConfigError, as_section, to_yaml
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
from verl.utils.dataset.parquet import read_parquet_rows
from verl.utils.dataset.sft_dataset import SFTDataset
from verl.utils.evaluation import evaluate_greedy_accuracy
from verl.utils.lora import (
    adapter_base_path,
    apply_lora,
    count_parameters,
    full_adapter_state,
    is_adapter_dir,
    lora_enabled,
    save_adapter,
    trainable_parameters,
)
from verl.utils.model import import_external_lib, load_causal_lm, load_tokenizer, resolve_model_path
from verl.utils.optim import build_adamw
from verl.utils.ported_keys import check_sft_ported_keys, sft_column_paths
from verl.utils.torch_functional import set_seed
from verl.utils.tracking import Tracking


def sft_loss(model, micro_batch: dict[str, torch.Tensor], num_target_tokens: int) -> torch.Tensor:
    """Sum of next-token cross-entropy over response tokens, divided by the global batch's response-token count.

    logits[:, t] predicts input_ids[:, t + 1], so the mask is shifted with the labels. Dividing by the global count
    (not the micro-batch's) makes accumulated gradients equal to one big batch's.
    """
    logits = model(input_ids=micro_batch["input_ids"], attention_mask=micro_batch["attention_mask"]).logits
    logits = logits[:, :-1].float()
    labels = micro_batch["input_ids"][:, 1:]
    mask = micro_batch["loss_mask"][:, 1:].to(logits.dtype)
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), reduction="none")
    return (nll * mask.reshape(-1)).sum() / max(1, num_target_tokens)


def train_step(model, optimizer, scheduler, batch: dict[str, torch.Tensor], micro_batch_size: int, clip_grad: float):
    """One optimizer step over ``batch``, accumulating gradients over micro-batches."""
    model.train()
    optimizer.zero_grad(set_to_none=True)
    num_target_tokens = int(batch["loss_mask"][:, 1:].sum())
    loss_total = 0.0
    for start in range(0, batch["input_ids"].shape[0], micro_batch_size):
        micro = {k: v[start : start + micro_batch_size] for k, v in batch.items()}
        loss = sft_loss(model, micro, num_target_tokens)
        loss.backward()
        loss_total += loss.item()
    grad_norm = torch.nn.utils.clip_grad_norm_(trainable_parameters(model), clip_grad)
    if torch.isfinite(grad_norm):
        optimizer.step()
    scheduler.step()
    return {"train/loss": loss_total, "train/grad_norm": float(grad_norm), "train/lr": scheduler.get_last_lr()[0]}


@torch.no_grad()
def validation_loss(model, loader) -> float:
    model.eval()
    total, tokens = 0.0, 0
    for batch in loader:
        n = int(batch["loss_mask"][:, 1:].sum())
        total += sft_loss(model, batch, 1).item()
        tokens += n
    return total / max(1, tokens)


def wrap_lora(model: torch.nn.Module, model_cfg: Any, seed: int) -> torch.nn.Module:
    """``model`` in a ``PeftModel`` (`verl.utils.lora.apply_lora`): the adapter at ``model.lora_adapter_path``, else
    fresh rank-``lora_rank`` adapters drawn from ``seed``. The adapter's config names ``model.partial_pretrain`` (as a
    local directory) as its base, the model it was trained on: an adapter directory there (a base with an earlier
    adapter merged in) is a base too, since loading it merges that adapter again."""
    base_path = os.path.abspath(resolve_model_path(model_cfg.partial_pretrain))
    adapter_path = model_cfg.lora_adapter_path
    if adapter_path is not None and is_adapter_dir(os.path.expanduser(str(adapter_path))):
        trained_on = adapter_base_path(os.path.expanduser(str(adapter_path)))
        if os.path.realpath(os.path.expanduser(trained_on)) != os.path.realpath(base_path):
            print(
                f"WARNING: model.lora_adapter_path={adapter_path} was trained on {trained_on}, and "
                f"model.partial_pretrain={model_cfg.partial_pretrain} is {base_path}: the adapter goes on training "
                "on the latter, and the checkpoints name it as their base"
            )
    model = apply_lora(model, model_cfg, seed=seed, task_type="CAUSAL_LM", key="model")
    model.peft_config["default"].base_model_name_or_path = base_path
    return model


def build_sft_datasets(
    config: SFTTrainerConfig, tokenizer
) -> tuple[torch.utils.data.Dataset, torch.utils.data.Dataset]:
    """Train and validation datasets: prompt/response pairs, or whole conversations with ``data.multiturn.enable``."""
    d = config.data
    if d.multiturn.enable:
        return MultiTurnSFTDataset(d.train_files, tokenizer, d), MultiTurnSFTDataset(d.val_files, tokenizer, d)
    if d.apply_chat_template_kwargs:
        raise ConfigError(
            f"data.apply_chat_template_kwargs={dict(d.apply_chat_template_kwargs)}: passed to the chat template in "
            "multi-turn SFT only (data.multiturn.enable=true); prompt/response rows use the template as it is"
        )
    prompt_path, response_path = sft_column_paths(config)
    return (
        SFTDataset(d.train_files, tokenizer, prompt_path, response_path, d.max_length, d.truncation),
        SFTDataset(d.val_files, tokenizer, prompt_path, response_path, d.max_length, d.truncation),
    )


def warn_short_val_generation(rows: list, tokenizer, response_key: str, max_new_tokens: int) -> int:
    """Warn when the held-out reference answers are longer than the greedy budget: val/acc would then count
    answers cut short as wrong (a program of 60 tokens scored after 32). Returns the longest answer in tokens."""
    from verl.utils.dataset.parquet import get_nested

    longest = 0
    for row in rows:
        try:
            answer = get_nested(row, response_key)
        except (KeyError, ValueError):
            continue
        if isinstance(answer, str):
            longest = max(longest, len(tokenizer(answer, add_special_tokens=False)["input_ids"]) + 1)
    if longest > max_new_tokens:
        print(
            f"WARNING: the longest held-out reference answer ({response_key}) has {longest} tokens with its end token, "
            f"more than trainer.val_generation_max_new_tokens={max_new_tokens}: val/acc counts answers cut short as "
            f"wrong. Set trainer.val_generation_max_new_tokens={longest} or more."
        )
    return longest


def _check_sft_sizes(config: SFTTrainerConfig) -> None:
    """Batch sizes and the log cadence count sequences or steps, and micro-batches must tile the batch."""
    d = config.data
    for key, value in (
        ("data.train_batch_size", d.train_batch_size),
        ("data.micro_batch_size_per_gpu", d.micro_batch_size_per_gpu),
        ("trainer.log_freq", config.trainer.log_freq),
    ):
        if value is None or value < 1:
            raise ConfigError(f"{key}={value}: it counts sequences or steps, so it must be >= 1")
    if d.train_batch_size % d.micro_batch_size_per_gpu:
        raise ConfigError(
            f"data.train_batch_size={d.train_batch_size} must be a multiple of "
            f"data.micro_batch_size_per_gpu={d.micro_batch_size_per_gpu}"
        )


def _make_output_dir(config: SFTTrainerConfig) -> str:
    """``trainer.default_local_dir`` made absolute and created, with the run's config written there first."""
    out_dir = os.path.abspath(os.path.expanduser(config.trainer.default_local_dir))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.yaml"), "w") as f:
        f.write(to_yaml(config))
    return out_dir


def load_sft_model(model_cfg: Any, seed: int) -> tuple[Any, torch.nn.Module, bool]:
    """(tokenizer, model, whether LoRA trains adapters only) for ``config.model``; LoRA adapters are drawn from
    ``seed``."""
    m = model_cfg
    import_external_lib(m.external_lib)
    tokenizer = load_tokenizer(m.partial_pretrain, padding_side="right", trust_remote_code=m.trust_remote_code)
    model = load_causal_lm(m.partial_pretrain, dtype=m.dtype, trust_remote_code=m.trust_remote_code)
    if m.enable_gradient_checkpointing:
        model.gradient_checkpointing_enable()
    lora = lora_enabled(m)
    if lora:
        model = wrap_lora(model, m, seed)
        if m.enable_gradient_checkpointing:
            model.enable_input_require_grads()  # reentrant checkpoints pass grads on only to inputs requiring them
        counts = count_parameters(model)
        print(
            f"LoRA: training {counts['trainable']:,} of {counts['total']:,} parameters "
            f"({counts['trainable'] / max(1, counts['total']):.2%}); checkpoints are PEFT adapter directories"
        )
    return tokenizer, model, lora


def _held_out_rows(config: SFTTrainerConfig, tokenizer) -> list:
    """The validation rows that greedy accuracy replays (at most ``trainer.val_max_samples``)."""
    d = config.data
    val_rows = read_parquet_rows(d.val_files)
    if config.trainer.val_max_samples > 0:
        val_rows = val_rows[: config.trainer.val_max_samples]
    if not d.multiturn.enable:
        warn_short_val_generation(val_rows, tokenizer, d.response_key, config.trainer.val_generation_max_new_tokens)
    return val_rows


def build_sft_loaders(
    config: SFTTrainerConfig, train_ds: torch.utils.data.Dataset, val_ds: torch.utils.data.Dataset
) -> tuple[torch.utils.data.DataLoader, torch.utils.data.DataLoader]:
    """Full training batches (shuffled from ``trainer.seed`` with ``data.shuffle``) and validation batches."""
    d = config.data
    generator = torch.Generator().manual_seed(config.trainer.seed)
    train_loader = torch.utils.data.DataLoader(
        train_ds,
        batch_size=d.train_batch_size,
        shuffle=d.shuffle,
        drop_last=True,
        generator=generator,
        collate_fn=train_ds.collate,
    )
    val_loader = torch.utils.data.DataLoader(
        val_ds, batch_size=config.trainer.val_batch_size, collate_fn=val_ds.collate
    )
    if len(train_loader) == 0:
        raise ConfigError(f"the training set has {len(train_ds)} rows, fewer than data.train_batch_size")
    return train_loader, val_loader


@dataclass
class SFTRun:
    """What checkpoints and validation of one SFT run need, beside the training loop."""

    config: SFTTrainerConfig
    out_dir: str
    model: torch.nn.Module
    tokenizer: Any
    lora: bool  # checkpoints hold the adapters alone
    val_rows: list
    val_loader: torch.utils.data.DataLoader
    tracker: Tracking

    def save(self, step: int) -> str:
        """An HF checkpoint (a PEFT adapter directory with LoRA) in ``global_step_{step}``; returns its path."""
        ckpt_dir = os.path.join(self.out_dir, f"global_step_{step}")
        if self.lora:
            return save_adapter(self.model, full_adapter_state(self.model), self.tokenizer, ckpt_dir)
        return save_hf_checkpoint(self.model, self.tokenizer, ckpt_dir)

    def validate(self, step: int) -> dict[str, Any]:
        """Validation loss and greedy accuracy (replayed conversations with ``data.multiturn.enable``), logged at
        ``step``; returned with the accuracy's samples."""
        t, model, tokenizer = self.config.trainer, self.model, self.tokenizer
        if self.config.data.multiturn.enable:
            mt = self.config.data.multiturn
            acc = evaluate_replay_success(
                model,
                tokenizer,
                self.val_rows,
                mt.messages_key,
                mt.tools_key,
                t.val_generation_max_new_tokens,
                t.val_batch_size,
            )
        else:
            acc = evaluate_greedy_accuracy(
                model, tokenizer, self.val_rows, t.val_generation_max_new_tokens, t.val_batch_size
            )
        metrics = {"val/loss": validation_loss(model, self.val_loader), "val/acc": acc["acc"]}
        metrics.update({f"val/{k}": v for k, v in acc.items() if k.startswith("acc/")})
        self.tracker.log(metrics, step)
        return {**metrics, "samples": acc["samples"]}


def train_sft(run: SFTRun, train_loader, optimizer, scheduler, total_steps: int) -> int:
    """``total_steps`` optimizer steps over as many epochs of ``train_loader`` as it takes, logging, validating and
    saving at the trainer's cadence (the last step's validation and checkpoint are the caller's); returns the step
    count."""
    t, d = run.config.trainer, run.config.data
    step, epoch = 0, 0
    progress = tqdm(total=total_steps, desc="sft", dynamic_ncols=True, file=sys.stdout, disable=None)  # no bar off-TTY
    while step < total_steps:
        for batch in train_loader:
            step += 1
            metrics = train_step(
                run.model, optimizer, scheduler, batch, d.micro_batch_size_per_gpu, run.config.optim.clip_grad
            )
            if not math.isfinite(metrics["train/loss"]):
                raise FloatingPointError(f"SFT loss became {metrics['train/loss']} at step {step}: lower optim.lr")
            metrics["train/epoch"] = epoch
            progress.update(1)
            progress.set_postfix(loss=f"{metrics['train/loss']:.4f}")
            if step % t.log_freq == 0 or step == total_steps:
                run.tracker.log(metrics, step)
            if t.test_freq > 0 and step % t.test_freq == 0 and step < total_steps:
                run.validate(step)
            if t.save_freq > 0 and step % t.save_freq == 0 and step < total_steps:
                run.save(step)
            if step >= total_steps:
                break
        epoch += 1
    progress.close()
    return step


def run_sft(config: SFTTrainerConfig | Any) -> dict[str, Any]:
    """Train per ``config`` (the loaded ``SFTTrainerConfig``; verl's ``DictConfig`` or a dict of its keys is loaded as
    overrides); returns the final validation metrics and the checkpoint path."""
    config = as_section(config, SFTTrainerConfig)
    check_sft_ported_keys(config)
    set_seed(config.trainer.seed)
    out_dir = _make_output_dir(config)
    _check_sft_sizes(config)
    tokenizer, model, lora = load_sft_model(config.model, config.trainer.seed)
    train_ds, val_ds = build_sft_datasets(config, tokenizer)
    val_rows = _held_out_rows(config, tokenizer)
    train_loader, val_loader = build_sft_loaders(config, train_ds, val_ds)
    t, o = config.trainer, config.optim
    total_steps = t.total_training_steps or len(train_loader) * t.total_epochs
    optimizer, scheduler = build_adamw(
        trainable_parameters(model),  # every weight, or the adapters alone with LoRA
        o.lr,
        o.betas,
        o.weight_decay,
        total_steps,
        int(o.warmup_steps_ratio * total_steps),
        o.lr_scheduler,
        o.min_lr_ratio,
    )
    tracker = Tracking(
        default_backend=t.logger,
        log_dir=out_dir,
        console_keys=["train/loss", "train/lr", "val/loss", "val/acc"],
        write=tqdm.write,
    )
    print(
        f"SFT: {len(train_ds)} train / {len(val_ds)} val examples ({train_ds.num_truncated} truncated), "
        f"{total_steps} steps of {config.data.train_batch_size}; logs and checkpoints in {out_dir}"
    )
    run = SFTRun(config, out_dir, model, tokenizer, lora, val_rows, val_loader, tracker)
    start = time.time()
    step = train_sft(run, train_loader, optimizer, scheduler, total_steps)
    final = run.validate(step)
    ckpt = run.save(step)
    tracker.close()
    final.update({"checkpoint": ckpt, "train_seconds": time.time() - start, "steps": step})
    return final


def main(argv: list[str] | None = None) -> dict[str, Any]:
    config = job_config("sft_trainer", argv, "verl.trainer.main_sft", __doc__)
    if config is None:  # --help or --cfg job: printed, nothing to run
        return None
    result = run_sft(config)
    for s in result["samples"][:3]:
        print(f"  sample: {s['prompt']!r} -> {s['response']!r} (truth {s['ground_truth']}, score {s['score']})")
    print(
        f"held-out greedy accuracy: {result['val/acc']:.1%} on {', '.join(config.data.val_files)} "
        f"after {result['steps']} steps ({result['train_seconds']:.0f}s); checkpoint: {result['checkpoint']}"
    )
    return result


if __name__ == "__main__":
    run_cli(main)
