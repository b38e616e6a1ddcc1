"""Role workers: what the controller calls. One class per role group, as in verl.

- ``ActorRolloutRefWorker``: the actor, its rollout (the hybrid engine) and optionally the frozen reference policy.
- ``CriticWorker``: the value model.
- ``RewardModelWorker``: a sequence-classification reward model.

The same classes serve both backends. Local backend: one in-process object per role holding whole models; the
rollout samples with the actor's module in place. Ray backend: one object per rank in each worker process, a
process group up (gloo on CPU, NCCL on GPU); the actor, critic and reference are sharded with FSDP2, and before each
generation the HF sampler's replica receives the actor's full weights (the reshard from training to generation
layout) and frees them afterwards, while a vLLM engine (one per rank, or one per tensor-parallel group of ranks) keeps
its own copy, refreshed from the shards after each actor update. ``@register`` says how a worker group spreads each
call over the ranks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

import torch

from verl.protocol import DataProto
from verl.single_controller.base import Dispatch, Worker, register
from verl.utils.checkpoint import save_hf_checkpoint
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.failpoints import failpoint
from verl.utils.fsdp_utils import (
    apply_fsdp2,
    full_state_dict,
    iter_full_tensors,
    load_dcp,
    local_state_bytes,
    save_dcp,
)
from verl.utils.lora import (
    ADAPTER_DIR,
    apply_lora,
    full_adapter_state,
    iter_merged_full_tensors,
    lora_enabled,
    save_adapter,
    trainable_parameters,
)
from verl.utils.model import (
    import_external_lib,
    load_causal_lm,
    load_tokenizer,
    load_value_model,
    resolve_model_path,
)
from verl.utils.optim import build_adamw, scale_lr_schedule
from verl.workers.actor.dp_actor import DataParallelPPOActor
from verl.workers.config import ActorRolloutRefConfig, FSDPCriticConfig, RefConfig, RewardModelConfig, RolloutConfig
from verl.workers.critic.dp_critic import DataParallelPPOCritic
from verl.workers.rollout.ahead import AheadRolloutMixin
from verl.workers.rollout.base import BaseRollout, TokenOutput, get_rollout_class, registered_rollouts

logger = logging.getLogger(__name__)


def build_optimizer(module: torch.nn.Module, optim_cfg, total_steps: int):
    """AdamW with linear warmup, then constant or cosine decay (verl's ``optim`` keys; ``lr_scheduler_type`` already
    holds a given ``warmup_style``, and a null ``min_lr_ratio`` is 0 as in verl)."""
    warmup = optim_cfg.lr_warmup_steps
    if warmup is None or warmup < 0:
        warmup = int(optim_cfg.lr_warmup_steps_ratio * total_steps)
    return build_adamw(
        trainable_parameters(module),  # with LoRA the adapters alone: the frozen base carries no optimizer state
        optim_cfg.lr,
        optim_cfg.betas,
        optim_cfg.weight_decay,
        total_steps,
        warmup,
        optim_cfg.lr_scheduler_type,
        optim_cfg.min_lr_ratio or 0.0,
        optim_cfg.num_cycles,
    )


def _log_prob_pass(data: DataProto, cfg: RolloutConfig | RefConfig, temperature: float) -> DataProto:
    """``data`` (same tensors) with this role's pass settings in a new ``meta_info``: micro-batch rows, token-budget
    micro-batches (``log_prob_use_dynamic_bsz``, ``log_prob_max_token_len_per_gpu``) and the temperature. The
    caller's own keys win; its ``meta_info`` is never written, so one role's settings cannot leak into the next
    role's pass when workers run in the controller's process."""
    defaults = {
        "micro_batch_size": cfg.log_prob_micro_batch_size_per_gpu,
        "use_dynamic_bsz": cfg.log_prob_use_dynamic_bsz,
        "max_token_len": cfg.log_prob_max_token_len_per_gpu,
        "temperature": temperature,
    }
    return DataProto(
        None if data.batch is None else data.batch.copy(), data.non_tensor_batch, {**defaults, **data.meta_info}
    )


def log_prob_temperature(rollout_cfg: RolloutConfig) -> float:
    """The temperature log-probs are scored at: ``rollout.temperature``, or 1 where it is <= 0 (greedy sampling,
    as in vLLM: the policy's own distribution, not a division by zero)."""
    temperature = float(rollout_cfg.temperature)
    return temperature if temperature > 0 else 1.0


def stop_token_ids(model_path: str, tokenizer) -> list[int]:
    """Ids that end a response: the model's ``generation_config.json`` ``eos_token_id`` (chat models list several,
    e.g. Qwen2.5-Instruct's <|im_end|> and <|endoftext|>) plus the tokenizer's EOS."""
    ids: list[int] = []
    try:
        from transformers import GenerationConfig

        eos = GenerationConfig.from_pretrained(resolve_model_path(model_path)).eos_token_id
    except (OSError, ValueError):  # no generation_config.json: the tokenizer's EOS alone
        eos = None
    for e in ([eos] if isinstance(eos, int) else list(eos or [])) + [tokenizer.eos_token_id]:
        if e is not None and int(e) not in ids:
            ids.append(int(e))
    return ids


def rollout_engine(name: str, mode: str) -> type[BaseRollout]:
    """The engine class of ``rollout.name``/``rollout.mode``. A name no engine is registered for runs the HF sampler
    (the config check has already warned that it does: ``verl.utils.ported_keys``); a bad mode is an error."""
    if (name, mode) not in registered_rollouts() and mode in ("sync", "async"):
        logger.info("rollout.name=%s is not a registered engine: the HF sampler runs", name)
        name = "hf"
    return get_rollout_class(name, mode)


def _set_params(module: torch.nn.Module, state: dict[str, torch.Tensor] | None) -> None:
    """Point ``module``'s parameters at ``state``'s tensors (None: at empty tensors, freeing the memory). Tied
    parameters are one object, so they stay tied."""
    for name, p in module.named_parameters():
        p.data = state[name].to(p.dtype) if state is not None else torch.empty(0, dtype=p.dtype, device=p.device)


def _save_role_checkpoint(
    worker: Worker, path: str, module, optimizer, hf_module_fn, tokenizer, extra: dict, lora: bool = False
) -> None:
    """``path/{dcp,huggingface,extra_state.pt}`` (see verl.utils.fsdp_utils); every rank calls it. ``lora``: the
    adapter alone, ``dcp/`` with its optimizer state and ``lora_adapter/`` in PEFT's format, instead of
    ``huggingface/`` (``python -m verl.model_merger merge --merge_lora`` writes the merged model)."""
    os.makedirs(path, exist_ok=True)
    save_dcp(os.path.join(path, "dcp"), module, optimizer, trainable_only=lora)
    # collective in the Ray backend: every rank gathers, rank 0 writes
    state = full_adapter_state(module) if lora else hf_module_fn()
    if worker.rank == 0:
        if lora:
            save_adapter(module, state, tokenizer, os.path.join(path, ADAPTER_DIR))
        else:
            save_hf_checkpoint(state, tokenizer, os.path.join(path, "huggingface"))
        torch.save(extra, os.path.join(path, "extra_state.pt"))
    if worker.distributed:
        torch.distributed.barrier()


def _load_extra(path: str) -> dict:
    extra = os.path.join(path, "extra_state.pt")
    if not os.path.isfile(extra):
        raise FileNotFoundError(f"{extra}: missing; a checkpoint directory holds dcp/, huggingface/, extra_state.pt")
    return torch.load(extra, weights_only=False)


class ActorRolloutRefWorker(AheadRolloutMixin, Worker):
    """``role``: ``actor_rollout``, ``actor_rollout_ref`` or ``ref``."""

    def __init__(self, config, role: str = "actor_rollout", total_training_steps: int = 1, seed: int = 0):
        self.config: ActorRolloutRefConfig = omega_conf_to_dataclass(config, ActorRolloutRefConfig)
        self.role = role
        self._is_actor = role.startswith("actor")
        self._is_ref = role.endswith("ref")
        self.total_training_steps = max(1, total_training_steps)
        self.seed = seed

    @register(Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        cfg = self.config
        import_external_lib(cfg.model.external_lib)
        self.tokenizer = load_tokenizer(cfg.model.path, trust_remote_code=cfg.model.trust_remote_code)
        self._is_lora = lora_enabled(cfg.model)
        if self._is_actor:
            self.actor_module = self._load_policy()
            if self._is_lora:  # adapters on the frozen base (verl.utils.lora), before sharding
                self.actor_module = apply_lora(self.actor_module, cfg.model, self.seed, key="actor_rollout_ref.model")
            if cfg.model.enable_gradient_checkpointing:
                self.actor_module.gradient_checkpointing_enable()
                if self._is_lora:  # the frozen embeddings' output must carry grad for the recomputed layers
                    self.actor_module.enable_input_require_grads()
            if self.distributed:
                apply_fsdp2(self.actor_module, cfg.actor.fsdp_config, self.device)
                # the rollout's own full-weight module: filled from the shards before each generation, then freed
                self.rollout_module = self._load_policy().to(self.device)
                _set_params(self.rollout_module, None)
            else:
                self.actor_module.to(self.device)
                self.rollout_module = self.actor_module  # hybrid engine in one process: the same weights in place
            self.actor_optimizer, self.actor_lr_scheduler = build_optimizer(
                self.actor_module, cfg.actor.optim, self.total_training_steps
            )
            self.actor = DataParallelPPOActor(
                cfg.actor,
                self.actor_module,
                self.actor_optimizer,
                use_remove_padding=cfg.model.use_remove_padding,
                use_shared_prefix=cfg.model.use_shared_prefix,
                pad_token_id=self.tokenizer.pad_token_id,
            )
            # an engine with its own copy of the weights (vLLM) is handed the actor's after every change
            self._engine_owns_weights = cfg.rollout.name == "vllm"
            self._weights_stale = self._engine_owns_weights
            self._engine_has_base = False  # a LoRA engine's base weights, handed over once
            # the policy (a LoRA one gets an engine that takes adapters); the HF sampler: the module it runs
            self.rollout: BaseRollout = self._build_rollout(
                self.actor_module if self._engine_owns_weights else self.rollout_module
            )
        if self._is_ref and self._is_lora and self._is_actor:
            # the reference is the actor's base: the same module with its adapters off, no second copy
            self.ref_module = self.actor_module
        elif self._is_ref:
            self.ref_module = self._load_policy()
            self.ref_module.requires_grad_(False)
            if self.distributed:
                apply_fsdp2(self.ref_module, cfg.ref.fsdp_config, self.device)
            else:
                self.ref_module.to(self.device)
        if self._is_ref:
            self.ref_policy = DataParallelPPOActor(
                cfg.actor,
                self.ref_module,
                use_remove_padding=cfg.model.use_remove_padding,
                use_shared_prefix=cfg.model.use_shared_prefix,
                pad_token_id=self.tokenizer.pad_token_id,
            )
            self.ref_policy.chunked_logprobs |= bool(cfg.ref.entropy_from_logits_with_chunking)

    def _build_rollout(self, module: torch.nn.Module) -> BaseRollout:
        """An engine of ``rollout.name`` in the hybrid engine, sampling with ``module``."""
        cfg = self.config
        return rollout_engine(cfg.rollout.name, cfg.rollout.mode).build_hybrid(
            module=module,
            config=cfg.rollout,
            tokenizer=self.tokenizer,
            eos_token_ids=stop_token_ids(cfg.model.path, self.tokenizer),
            seed=self.seed,
            model_path=cfg.model.path,
        )

    def _load_policy(self) -> torch.nn.Module:
        m = self.config.model
        return load_causal_lm(
            m.path, dtype=m.dtype, override_config=dict(m.override_config), trust_remote_code=m.trust_remote_code
        )

    def _sync_engine_weights(self) -> float:
        """Hand the actor's current weights to a vLLM engine when they changed since the last hand-over; returns
        the seconds it took (0 for the HF sampler, which samples with the actor's module itself). On the Ray
        backend each tensor is all-gathered from the FSDP2 shards as the engine's buckets fill (every rank, a
        collective): one bucket of full tensors at a time beside the engine's copy, and no disk round trip. A LoRA
        policy's engine gets the base weights once and then each update's adapter alone."""
        if not getattr(self, "_weights_stale", False):
            return 0.0
        t = time.perf_counter()
        if getattr(self.rollout, "lora_rank", 0) > 0:  # the engine keeps the base and takes the adapter alone
            if not self._engine_has_base:
                with self.actor_module.disable_adapter():
                    self.rollout.load_weights(iter_merged_full_tensors(self.actor_module))
                self._engine_has_base = True
            self.rollout.load_adapter(self.actor_module, full_adapter_state(self.actor_module))
        else:
            self.rollout.load_weights(self._iter_policy_weights())
        self._weights_stale = False
        return time.perf_counter() - t

    def _iter_policy_weights(self):
        """The policy's whole weights under the base model's names (a LoRA policy's adapters merged in)."""
        if self._is_lora:
            return iter_merged_full_tensors(self.actor_module)
        return iter_full_tensors(self.actor_module)

    def _gather_rollout_weights(self) -> None:
        if self.rollout_module is not self.actor_module:
            state = dict(self._iter_policy_weights()) if self._is_lora else full_state_dict(self.actor_module)
            _set_params(self.rollout_module, state)

    def _free_rollout_weights(self) -> None:
        if self.rollout_module is not self.actor_module:
            _set_params(self.rollout_module, None)

    @register(Dispatch.DP_COMPUTE_PROTO, pad=True)
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        """The rollout of this rank's share of ``prompts``. The HF sampler on the Ray backend samples with full
        weights gathered from the shards for the call (``timing_s/reshard``); a vLLM engine holds its own copy,
        refreshed after each actor update (``timing_s/update_weights``: the gather from the shards included)."""
        timing = {}
        if getattr(self, "_engine_owns_weights", False):
            timing["update_weights"] = self._sync_engine_weights()
        elif self.distributed:
            t = time.perf_counter()
            self._gather_rollout_weights()
            timing["reshard"] = time.perf_counter() - t
        try:
            out = self.rollout.generate_sequences(prompts)
            failpoint("rollout.generate")
        finally:
            self._free_rollout_weights()
        if timing:
            out.meta_info["timing"] = timing
        return out

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict,
        request_id: str,
        image_data: list | None = None,
        video_data: list | None = None,
        priority: int = 0,
    ) -> TokenOutput:
        """One request to this worker's rollout (verl's server call, ``vLLMHttpServer.generate``): what an agent loop
        drives. In process only (``trainer.backend=local``, where the rollout samples with the actor's module in
        place); on the Ray backend the rollout's weights are gathered collectively per batch call, so a per-request
        call has none to use (docs/rollout.md says what is missing). A vLLM engine first gets the actor's weights
        if they changed since its last hand-over, so a request after an update samples the updated policy."""
        if not self._is_actor:
            raise RuntimeError(f"role {self.role!r} has no rollout: generate needs actor_rollout or actor_rollout_ref")
        if self.rollout_module is not self.actor_module:
            raise NotImplementedError(
                "per-request generate runs with trainer.backend=local only: on the Ray backend the rollout's full "
                "weights exist only during a generate_sequences call (gathered from the FSDP shards by every rank)"
            )
        # on the event loop's thread, so no request of this loop slips past it: the engine lock waits for a batch in
        # flight, and every batch that starts after the hand-over (queued requests included) samples the new weights
        self._sync_engine_weights()
        return await self.rollout.generate(
            prompt_ids, sampling_params, request_id, image_data=image_data, video_data=video_data, priority=priority
        )

    @register(Dispatch.DP_COMPUTE_PROTO, pad=True)
    def compute_log_prob(self, data: DataProto) -> DataProto:
        data = _log_prob_pass(data, self.config.rollout, log_prob_temperature(self.config.rollout))
        log_probs, entropys = self.actor.compute_log_prob(self.to_device(data), calculate_entropy=True)
        out = {"old_log_probs": log_probs, "entropys": entropys}
        return self.to_host(DataProto.from_dict(out, meta_info={"temperature": data.meta_info["temperature"]}))

    @register(Dispatch.DP_COMPUTE_PROTO, pad=True)
    def compute_ref_log_prob(self, data: DataProto) -> DataProto:
        data = _log_prob_pass(data, self.config.ref, log_prob_temperature(self.config.rollout))
        base = self.ref_module is getattr(self, "actor_module", None)  # LoRA: the actor with its adapters off
        with self.actor_module.disable_adapter() if base else contextlib.nullcontext():
            log_probs, _ = self.ref_policy.compute_log_prob(self.to_device(data))
        return self.to_host(DataProto.from_dict({"ref_log_prob": log_probs}))

    @register(Dispatch.DP_COMPUTE_PROTO)
    def update_actor(self, data: DataProto) -> DataProto:
        meta = {"temperature": log_prob_temperature(self.config.rollout), **data.meta_info}
        data = DataProto(None if data.batch is None else data.batch.copy(), data.non_tensor_batch, meta)
        metrics = self.actor.update_policy(self.to_device(data))
        self._weights_stale = self._engine_owns_weights  # the engine gets them before it samples again
        # the rate the last optimizer step used: the schedule's times actor.trust_region's multiplier
        metrics["actor/lr"] = self.actor_lr_scheduler.get_last_lr()[0] * self.actor.lr_scale
        mem = local_state_bytes(self.actor_module, self.actor_optimizer)  # this worker's shards
        metrics["perf/actor_param_mb"] = mem["param_bytes"] / 2**20
        metrics["perf/actor_optim_state_mb"] = mem["optim_bytes"] / 2**20
        self.actor_lr_scheduler.step()
        # an on-policy update computed the old log-probs the trainer skipped: they go back for its mismatch metrics
        pre_update = self.actor.on_policy_log_probs
        out = {} if pre_update is None else {"old_log_probs": pre_update}
        return self.to_host(DataProto.from_dict(out, meta_info={"metrics": metrics}))

    @register(Dispatch.ONE_TO_ALL)
    def memory_stats(self) -> dict[str, int]:
        """This rank's parameter and optimizer-state bytes of the actor (its shards only)."""
        return local_state_bytes(self.actor_module, self.actor_optimizer)

    def _full_actor_module(self) -> torch.nn.Module:
        if self.rollout_module is self.actor_module:
            return self.actor_module
        self._gather_rollout_weights()
        return self.rollout_module

    @register(Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, local_path: str) -> None:
        """``local_path/{dcp, huggingface, extra_state.pt}``: sharded model + optimizer, full HF weights, LR
        schedule and sampler state."""
        extra = {"lr_scheduler": self.actor_lr_scheduler.state_dict(), "rollout_rng": self.rollout.get_rng_state()}
        extra["lr_scale"] = self.actor.lr_scale  # actor.trust_region's multiplier: a resumed run goes on with it
        try:
            _save_role_checkpoint(
                self,
                local_path,
                self.actor_module,
                self.actor_optimizer,
                self._full_actor_module,
                self.tokenizer,
                extra,
                lora=self._is_lora,
            )
        finally:
            self._free_rollout_weights()

    @register(Dispatch.ONE_TO_ALL)
    def load_checkpoint(self, local_path: str) -> None:
        extra = _load_extra(local_path)
        dcp_dir = os.path.join(local_path, "dcp")
        load_dcp(dcp_dir, self.actor_module, self.actor_optimizer, trainable_only=self._is_lora)
        self.actor_lr_scheduler.load_state_dict(extra["lr_scheduler"])
        self.actor.lr_scale = extra.get("lr_scale", 1.0)  # checkpoints from before actor.trust_region: 1
        self.rollout.set_rng_state(extra["rollout_rng"])
        if getattr(self, "ahead_rollout", None) is not None:  # colocate_async: the controller's state, if it has one
            self.ahead_rollout.set_rng_state(extra["rollout_rng"])  # (a checkpoint of a sync run has not)
        self._weights_stale = self._engine_owns_weights

    @register(Dispatch.ONE_TO_ALL)
    def scale_lr(self, scale: float) -> None:
        """The actor's learning rate at ``scale`` x its configured schedule from now on (the collapse rollback)."""
        scale_lr_schedule(self.actor_lr_scheduler, scale)


class CriticWorker(Worker):
    def __init__(self, config, total_training_steps: int = 1, seed: int = 0):
        self.config: FSDPCriticConfig = omega_conf_to_dataclass(config, FSDPCriticConfig)
        self.total_training_steps = max(1, total_training_steps)
        self.seed = seed

    @register(Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        cfg = self.config
        import_external_lib(cfg.model.external_lib)
        path = resolve_model_path(cfg.model.path)
        # a seeded fresh value head, no dropout: same seed, same critic
        self.critic_module = load_value_model(path, self.seed, cfg.model.trust_remote_code)
        if cfg.model.dtype == "bf16":
            self.critic_module.to(torch.bfloat16)
        self._is_lora = lora_enabled(cfg.model)
        if self._is_lora:  # adapters plus a fully trained value head (PEFT's modules_to_save for TOKEN_CLS)
            self.critic_module = apply_lora(self.critic_module, cfg.model, self.seed, "TOKEN_CLS", "critic.model")
        if cfg.model.enable_gradient_checkpointing:
            self.critic_module.gradient_checkpointing_enable()
            if self._is_lora:
                self.critic_module.enable_input_require_grads()
        if self.distributed:
            apply_fsdp2(self.critic_module, cfg.model.fsdp_config, self.device)
        else:
            self.critic_module.to(self.device)
        self.tokenizer = load_tokenizer(path)
        self.critic_optimizer, self.critic_lr_scheduler = build_optimizer(
            self.critic_module, cfg.optim, self.total_training_steps
        )
        self.critic = DataParallelPPOCritic(cfg, self.critic_module, self.critic_optimizer)

    @register(Dispatch.DP_COMPUTE_PROTO, pad=True)
    def compute_values(self, data: DataProto) -> DataProto:
        return self.to_host(DataProto.from_dict({"values": self.critic.compute_values(self.to_device(data))}))

    @register(Dispatch.DP_COMPUTE_PROTO)
    def update_critic(self, data: DataProto) -> DataProto:
        metrics = self.critic.update_critic(self.to_device(data))
        metrics["critic/lr"] = self.critic_lr_scheduler.get_last_lr()[0]
        mem = local_state_bytes(self.critic_module, self.critic_optimizer)
        metrics["perf/critic_param_mb"] = mem["param_bytes"] / 2**20
        metrics["perf/critic_optim_state_mb"] = mem["optim_bytes"] / 2**20
        self.critic_lr_scheduler.step()
        return DataProto(meta_info={"metrics": metrics})

    @register(Dispatch.ONE_TO_ALL)
    def memory_stats(self) -> dict[str, int]:
        return local_state_bytes(self.critic_module, self.critic_optimizer)

    def _full_critic_module(self) -> torch.nn.Module:
        if not self.distributed:
            return self.critic_module
        from transformers import AutoModelForTokenClassification

        state = full_state_dict(self.critic_module)
        with torch.device("meta"):
            module = AutoModelForTokenClassification.from_config(self.critic_module.config)
        module.load_state_dict(state, assign=True)
        return module

    @register(Dispatch.ONE_TO_ALL)
    def save_checkpoint(self, local_path: str) -> None:
        extra = {"lr_scheduler": self.critic_lr_scheduler.state_dict()}
        module, optimizer = self.critic_module, self.critic_optimizer
        args = (self._full_critic_module, self.tokenizer, extra, self._is_lora)
        _save_role_checkpoint(self, local_path, module, optimizer, *args)

    @register(Dispatch.ONE_TO_ALL)
    def load_checkpoint(self, local_path: str) -> None:
        extra = _load_extra(local_path)
        dcp_dir = os.path.join(local_path, "dcp")
        load_dcp(dcp_dir, self.critic_module, self.critic_optimizer, trainable_only=self._is_lora)
        self.critic_lr_scheduler.load_state_dict(extra["lr_scheduler"])

    @register(Dispatch.ONE_TO_ALL)
    def scale_lr(self, scale: float) -> None:
        """The critic's learning rate at ``scale`` x its configured schedule from now on (the collapse rollback)."""
        scale_lr_schedule(self.critic_lr_scheduler, scale)


class RewardModelWorker(Worker):
    """Scores whole responses with any local HF ``AutoModelForSequenceClassification`` directory.

    In the Ray backend every rank holds the whole (forward-only) model and scores its data-parallel slice.

    The policy's tokens are decoded and re-tokenized with the RM's own tokenizer, so the RM need not share the
    policy's vocabulary. When the batch carries the prompt's messages (``data.return_raw_chat=true``) and the RM
    tokenizer has a chat template, the RM reads ``apply_chat_template(messages + [assistant: response])``, the format
    chat RMs are trained on; otherwise it reads the prompt as the policy saw it (its chat markup kept, padding
    dropped) followed by the response. The score lands on the last response token as ``rm_scores``.
    """

    def __init__(self, config, policy_tokenizer):
        self.config: RewardModelConfig = omega_conf_to_dataclass(config, RewardModelConfig)
        self.policy_tokenizer = policy_tokenizer

    @register(Dispatch.ONE_TO_ALL)
    def init_model(self) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        import_external_lib(self.config.model.external_lib)
        remote_code = self.config.model.trust_remote_code
        path = resolve_model_path(self.config.model.path)
        self.rm_tokenizer = AutoTokenizer.from_pretrained(
            self.config.model.input_tokenizer or path, trust_remote_code=remote_code
        )
        if self.rm_tokenizer.pad_token is None:
            self.rm_tokenizer.pad_token = self.rm_tokenizer.eos_token
        self.rm_tokenizer.padding_side = "right"
        self.rm_module = AutoModelForSequenceClassification.from_pretrained(path, trust_remote_code=remote_code)
        self.rm_module.eval().to(self.device)
        if self.rm_module.config.pad_token_id is None:
            self.rm_module.config.pad_token_id = self.rm_tokenizer.pad_token_id

    def rm_input_texts(self, data: DataProto) -> list[str]:
        """The text the RM scores for each row (see the class docstring)."""
        responses, mask = data.batch["responses"], data.batch["response_mask"]
        texts = self.policy_tokenizer.batch_decode(
            [responses[i][mask[i].bool()] for i in range(len(data))], skip_special_tokens=True
        )
        raw = data.non_tensor_batch.get("raw_prompt")
        if raw is not None and getattr(self.rm_tokenizer, "chat_template", None):
            return [
                self.rm_tokenizer.apply_chat_template(
                    [*list(messages), {"role": "assistant", "content": text}], tokenize=False
                )
                for messages, text in zip(raw, texts)
            ]
        if getattr(self.rm_tokenizer, "chat_template", None) and not getattr(self, "_warned_raw_chat", False):
            self._warned_raw_chat = True
            logger.warning(
                "the reward model's tokenizer has a chat template, but the batch has no prompt messages: set "
                "data.return_raw_chat=true so the RM reads the conversation in its own template"
            )
        prompts, prompt_mask = data.batch["prompts"], data.batch["attention_mask"][:, : data.batch["prompts"].shape[1]]
        prompt_texts = self.policy_tokenizer.batch_decode(  # the policy's chat markup kept, padding dropped
            [prompts[i][prompt_mask[i].bool()] for i in range(len(data))], skip_special_tokens=False
        )
        return [p + t for p, t in zip(prompt_texts, texts)]

    @register(Dispatch.DP_COMPUTE_PROTO, pad=True)
    @torch.no_grad()
    def compute_rm_score(self, data: DataProto) -> DataProto:
        responses, mask = data.batch["responses"], data.batch["response_mask"]
        inputs = self.rm_input_texts(data)
        scores = []
        for start in range(0, len(inputs), self.config.micro_batch_size_per_gpu):
            chunk = inputs[start : start + self.config.micro_batch_size_per_gpu]
            enc = self.rm_tokenizer(chunk, return_tensors="pt", padding=True, truncation=True)
            logits = self.rm_module(**enc.to(self.device)).logits.cpu()
            scores.append(logits[:, 0].float())
        scores = torch.cat(scores)
        rm_scores = torch.zeros(responses.shape, dtype=torch.float32)
        last = (mask.sum(-1) - 1).clamp(min=0).long()
        rm_scores[torch.arange(len(data)), last] = scores
        return DataProto.from_dict({"rm_scores": rm_scores})
