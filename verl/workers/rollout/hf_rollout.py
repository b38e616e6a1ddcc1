"""`HFRollout`: a native sampler over a Hugging Face causal LM, using the model's KV cache.

Hybrid engine: the rollout samples with the module it is given, in place -- the actor's own parameters, never a
copy -- so a policy update is visible to the next ``generate_sequences`` call with no weight sync.

Generation of one batch of left-padded prompts:

1. prefill: one forward pass over the prompts with their ``attention_mask`` and ``position_ids``, filling a KV cache
   (only the last position's logits are computed where the model takes ``logits_to_keep``);
2. decode: one token per step for every unfinished row, feeding the cache back as ``past_key_values``;
3. per-row EOS: a row that emits an EOS token is finished; it emits only ``pad_token_id`` afterwards;
4. retiring: finished rows are dropped from the active batch (the cache's batch rows are selected with
   ``DynamicCache.batch_select_indices``), so each step's compute shrinks as sequences finish. Where the cache type
   cannot be row-selected safely (static, quantized, offloaded or linear-attention caches) finished rows simply
   stay in the batch and their outputs are ignored -- the plain path. Both give the same tokens.

Sampling applies temperature, then top-k, then top-p (nucleus, at least one token kept) to float32 logits and draws
each token by inverse-CDF from a counter-based uniform: ``u = hash(seed, call, sample_index, position)``. A row's
randomness is keyed by its ``sample_index`` (a ``prompts.batch`` key the controller sets to the row's index in the
step's batch; default: the row's index in the batch passed in), so the samples do not depend on how the batch is
split -- into ``micro_batch_size`` chunks, across data-parallel workers, or by retiring finished rows. Same seed,
same samples, on one process or many. ``call`` counts sampling calls; ``get_rng_state``/``set_rng_state`` save and
restore ``(seed, call, requests)`` for checkpoint/resume.

``rollout_log_probs`` holds the log-probability of each sampled token under ``log_softmax(logits / temperature)``
computed BEFORE top-k/top-p filtering, i.e. exactly what the actor recomputes from the same ``input_ids`` with the
same temperature (the filtered proposal distribution is not what PPO's ratio uses). With greedy decoding it is
``log_softmax(logits)`` at temperature 1. It is 0 where ``response_mask`` is 0.

Output batch keys (as in volcengine/verl): ``prompts`` (bs, P), ``responses`` (bs, R) right-padded with
``pad_token_id`` and always exactly ``response_length`` wide so batches concatenate, ``input_ids`` (bs, P+R),
``attention_mask`` (bs, P+R), ``position_ids`` (bs, P+R) continuing the prompt positions, ``response_mask`` (bs, R)
(1 for generated tokens up to and including the first EOS) and ``rollout_log_probs`` (bs, R, float32).
``non_tensor_batch`` and ``meta_info`` pass through unchanged.

The per-request call of the rollout interface (`BaseRollout`), ``async generate(prompt_ids, sampling_params,
request_id) -> TokenOutput`` (`BatchedGenerate`, shared with vLLM), decodes concurrent requests together: a
`RequestBatcher` gathers them (those arriving within ``request_window_s``, at most ``rollout.max_num_seqs`` and
``micro_batch_size``) and one batched decode (`request_decode.decode_requests`) samples every request with its own
settings, in a worker thread. Draws are keyed by the request's number -- the count of ``generate`` calls before
it -- or by its own ``sampling_params["seed"]``, never by its batch. Batch and per-request decodes never overlap
(one lock). docs/rollout.md has the contract.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from verl.protocol import DataProto
from verl.utils.config import as_section
from verl.utils.forward import forward_signature, output_cache
from verl.utils.torch_dtypes import autocast_context
from verl.workers.config import RolloutConfig
from verl.workers.rollout.base import BaseRollout, TokenOutput
from verl.workers.rollout.batched_generate import BatchedGenerate
from verl.workers.rollout.kv_cache import can_select_rows, is_preallocated, preallocate, select_rows
from verl.workers.rollout.lean_decode import LeanDecoder
from verl.workers.rollout.partial import partial_prefix, unfinished_rows
from verl.workers.rollout.request_decode import decode_requests
from verl.workers.rollout.request_params import RequestSpec
from verl.workers.rollout.sampling import batch_sampling_params, filter_logits, keyed_uniform, sample_inverse_cdf

logger = logging.getLogger(__name__)

__all__ = ["HFRollout", "filter_logits", "keyed_uniform", "sample_inverse_cdf"]


def _as_rollout_config(config: RolloutConfig | Mapping | None) -> tuple[RolloutConfig, bool]:
    """``config`` as a `RolloutConfig` (`as_section`: a mapping's missing keys, and its nulls where the schema has
    no null, take the schema's defaults), and whether it sets ``response_length`` (a bare mapping may leave it to
    each call's ``meta_info``)."""
    if isinstance(config, RolloutConfig):
        return config, True
    raw = dict(config or {})  # a plain dict: as_section builds the dataclass from it (not a DictConfig view)
    return as_section(raw, RolloutConfig), raw.get("response_length") is not None


class HFRollout(BatchedGenerate, BaseRollout):
    """Sample responses for left-padded prompts with ``module`` (an HF ``PreTrainedModel``) used in place.

    Args:
        module: the causal LM; generation uses it directly (the actor's weights, no copy).
        config: a ``verl.workers.config.RolloutConfig``, or a mapping (dict or DictConfig) of its keys whose
            missing keys take the schema's defaults (``response_length`` has none here: give it in the mapping or
            in each call's ``meta_info``). Used: ``temperature``, ``top_p``, ``top_k``, ``do_sample``,
            ``response_length``, ``micro_batch_size`` (prompts per generation call; None: all), ``val_kwargs``
            (used when ``meta_info["validate"]`` is true), ``dtype``, ``ignore_eos`` and the fast-path switches
            ``share_prompt_prefill``, ``preallocate_kv_cache``, ``fused_decode``.
        pad_token_id: fills responses after EOS.
        eos_token_id: one id or a list of ids that end a response.
        seed: with the call counter and each row's ``sample_index``, the only source of randomness of sampling.
        retire_finished: drop finished rows from the active batch (default); False keeps the plain path where
            finished rows keep running and their outputs are ignored.
        request_window_s: how long the first of concurrent `generate` requests waits for others to join its batch.
    """

    def __init__(
        self,
        module: torch.nn.Module,
        config: Mapping | Any,
        pad_token_id: int,
        eos_token_id: int | list[int],
        seed: int = 0,
        *,
        retire_finished: bool = True,
        request_window_s: float = 0.002,
    ):
        if pad_token_id is None:
            raise ValueError("HFRollout needs a pad_token_id (use the EOS id when the tokenizer has no pad token)")
        if eos_token_id is None:
            raise ValueError("HFRollout needs an eos_token_id (an int or a list of ints)")
        super().__init__()
        self.module = module
        self.config, self._response_length_set = _as_rollout_config(config)
        self.pad_token_id = int(pad_token_id)
        eos = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
        if not eos:
            raise ValueError("HFRollout: eos_token_id is an empty list")
        self.eos_token_ids = [int(e) for e in eos]
        self.seed = int(seed)
        self.retire_finished = retire_finished
        self.calls = 0  # sampling calls so far: the second key of every draw
        self.request_window_s = float(request_window_s)  # the per-request state: BatchedGenerate
        self._engine_lock = threading.Lock()  # one decode at a time: batch calls and request batches share the module
        self._cache_kwarg, self._takes_logits_to_keep = forward_signature(module)
        # fused_decode: the one-token steps run through LeanDecoder (fewer, fused kernels; see lean_decode.py)
        self._lean = LeanDecoder.build(module) if self.config.fused_decode else None

    def _device(self) -> torch.device:
        for p in self.module.parameters():
            return p.device
        return torch.device("cpu")

    # ------------------------------------------------------------------------------------------------- settings

    def _sampling_params(self, meta_info: Mapping) -> dict[str, Any]:
        return batch_sampling_params(self.config, meta_info, self._response_length_set, engine="HFRollout")

    # -------------------------------------------------------------------------------------------------- public

    def generate_sequences(self, prompts: DataProto) -> DataProto:
        """Generate one response per prompt row; see the module docstring for the output contract."""
        if prompts.batch is None or "input_ids" not in prompts.batch:
            raise KeyError("HFRollout.generate_sequences: prompts.batch needs input_ids, attention_mask, position_ids")
        params = self._sampling_params(prompts.meta_info)
        batch = prompts.batch
        input_ids = batch["input_ids"]
        attention_mask = batch.get("attention_mask")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if input_ids.shape[0] and input_ids.shape[1] and not attention_mask[:, -1].all():
            rows = torch.nonzero(attention_mask[:, -1] == 0).flatten().tolist()
            raise ValueError(
                f"HFRollout: prompt rows {rows[:8]}{' ...' if len(rows) > 8 else ''} are not left-padded (a prompt must "
                "end in the last column: the next token is sampled after it). Tokenize with padding_side='left' "
                "(verl.utils.model.load_tokenizer does)."
            )
        position_ids = batch.get("position_ids")
        if position_ids is None:
            position_ids = torch.clamp(attention_mask.long().cumsum(-1) - 1, min=0)
        if position_ids.dim() != 2:
            raise ValueError(
                f"HFRollout: position_ids must be (bs, prompt_length), got shape {tuple(position_ids.shape)}"
            )

        bs = input_ids.shape[0]
        sample_index = batch.get("sample_index")
        if sample_index is None:
            sample_index = torch.arange(bs, dtype=torch.int64)
        partial = prompts.meta_info.get("partial_rollout")
        if partial is not None and partial.get("call") is not None:
            call = int(partial["call"])  # a resumed trajectory draws the keys it would have drawn uncut
        else:
            call = self.calls
            if params["do_sample"]:
                self.calls += 1  # greedy decoding consumes no randomness
        prefix, stop = partial_prefix(batch, partial, params["response_length"])
        micro = self.config.micro_batch_size
        micro = bs if micro is None or int(micro) <= 0 else int(micro)
        parts: list[dict[str, torch.Tensor]] = []
        with self._generation_session():
            for start in range(0, max(bs, 1), max(micro, 1)):
                end = min(start + micro, bs)
                parts.append(
                    self._generate_chunk(
                        input_ids[start:end],
                        attention_mask[start:end],
                        position_ids[start:end],
                        sample_index[start:end],
                        call,
                        params,
                        None if prefix is None else {k: v[start:end] for k, v in prefix.items()},
                        stop,
                    )
                )
        out = {key: torch.cat([p[key] for p in parts], dim=0) for key in parts[0]}
        meta = dict(prompts.meta_info)
        if partial is not None:
            out["rollout_unfinished"] = unfinished_rows(out["responses"], out["response_mask"], stop, self._stop_ids())
            meta["partial_rollout"] = {**partial, "call": call}  # a resume passes it back
        return DataProto(batch=out, non_tensor_batch=dict(prompts.non_tensor_batch), meta_info=meta)

    # ------------------------------------------------------------------------------------- per-request interface

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
    ) -> HFRollout:
        """The actor worker's sampler: ``module`` is the policy itself (sampled in place; ``model_path`` unused)."""
        return cls(module, config, pad_token_id=tokenizer.pad_token_id, eos_token_id=eos_token_ids, seed=seed)

    def _request_batch_limit(self) -> int:
        """``rollout.max_num_seqs`` requests per decode, and ``rollout.micro_batch_size`` when set."""
        limit, micro = int(self.config.max_num_seqs), self.config.micro_batch_size
        return min(limit, int(micro)) if micro is not None and int(micro) > 0 else limit

    def _decode_requests(self, requests: list[RequestSpec]) -> list[TokenOutput]:
        with self._generation_session():
            return decode_requests(self, requests)

    async def resume(self, tags: list[str]) -> None:
        """Nothing to bring back: the weights are the actor's module and the KV cache lives only during a decode."""

    async def release(self) -> None:
        """Nothing to free: see `resume`."""

    async def update_weights(self, weights: Iterable[tuple[str, torch.Tensor]], **kwargs: Any) -> None:
        """Load ``(name, tensor)`` pairs (the names of ``module.named_parameters()``/``named_buffers()``) into the
        sampled module: copied in place where the shapes match, else (a parameter freed between generations)
        re-pointed. In the hybrid engine the module is the actor's own and needs no update."""
        targets = dict(self.module.named_parameters(remove_duplicate=False))
        targets.update(self.module.named_buffers(remove_duplicate=False))
        with self._engine_lock, torch.no_grad():
            for name, tensor in weights:
                target = targets.get(name)
                if target is None:
                    raise KeyError(
                        f"HFRollout.update_weights: {name!r} is not a parameter or buffer of "
                        f"{type(self.module).__name__} (names as in its named_parameters())"
                    )
                if target.shape == tensor.shape:
                    target.copy_(tensor)
                else:
                    target.data = tensor.detach().to(device=target.device, dtype=target.dtype).clone()

    # ------------------------------------------------------------------------------------------------- internals

    @contextlib.contextmanager
    def _generation_session(self) -> Iterator[None]:
        """Exclusive use of the module for one decode: eval mode, no grad, ``rollout.dtype`` autocast and the fused
        step's weights taken from the live parameters (the policy may have been updated since the last decode)."""
        with self._engine_lock:
            module = self.module
            was_training = module.training
            module.eval()
            if self._lean is not None:
                self._lean.refresh()
            try:
                with torch.no_grad(), self._autocast():
                    yield
            finally:
                module.train(was_training)
                if self._lean is not None:
                    self._lean.release()

    def _vocab_size(self) -> int | None:
        embeddings = self.module.get_input_embeddings() if hasattr(self.module, "get_input_embeddings") else None
        return getattr(embeddings, "num_embeddings", None)

    def _max_model_len(self) -> int | None:
        """``rollout.max_model_len``, else the model's ``max_position_embeddings`` (None: no limit known)."""
        if self.config.max_model_len is not None:
            return int(self.config.max_model_len)
        value = getattr(getattr(self.module, "config", None), "max_position_embeddings", None)
        return int(value) if value is not None else None

    def _autocast(self):
        """``rollout.dtype: bf16``: sample under ``torch.autocast`` (the module's fp32 weights stay as they are)."""
        name = self.config.dtype
        return autocast_context(self._device().type, name, key="actor_rollout_ref.rollout.dtype")

    def _forward(self, input_ids, attention_mask, position_ids, past_key_values):
        kwargs: dict[str, Any] = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "use_cache": True,
        }
        if past_key_values is not None:
            kwargs[self._cache_kwarg] = past_key_values
        if self._takes_logits_to_keep:
            kwargs["logits_to_keep"] = 1
        out = self.module(**kwargs)
        cache = output_cache(out)
        if cache is None:
            raise RuntimeError(f"HFRollout: {type(self.module).__name__} returned no KV cache with use_cache=True")
        return out.logits[:, -1, :].float(), cache

    def _prefill(self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, capacity: int):
        """The prompt forward pass. With ``share_prompt_prefill`` (default) identical prompt rows (a prompt repeated
        ``n`` times for its samples) are computed once and their KV cache and last logits copied to every copy: the
        same numbers, 1/n of the prefill work. The cache is then moved into preallocated buffers of ``capacity``
        positions (`kv_cache.preallocate`), so decoding writes in place instead of re-concatenating."""
        shared = self.config.share_prompt_prefill and not getattr(self, "_rows_not_selectable", False)
        if shared and ids.shape[0] > 1:
            rows = torch.cat([ids, mask.to(ids.dtype), pos.to(ids.dtype)], dim=1)
            unique, inverse = torch.unique(rows, dim=0, return_inverse=True)
            if unique.shape[0] < ids.shape[0]:
                first = torch.full((unique.shape[0],), ids.shape[0], dtype=torch.long, device=ids.device)
                first.scatter_reduce_(0, inverse, torch.arange(ids.shape[0], device=ids.device), reduce="amin")
                logits, cache = self._forward(ids[first], mask[first], pos[first], None)
                self._preallocate(cache, capacity)
                if can_select_rows(cache):
                    return logits[inverse], select_rows(cache, inverse)
                self._rows_not_selectable = True  # this model's cache cannot be row-copied: no more shared prefills
                logits, cache = self._forward(ids, mask, pos, None)
                self._preallocate(cache, capacity)
                return logits, cache
        logits, cache = self._forward(ids, mask, pos, None)
        self._preallocate(cache, capacity)
        return logits, cache

    def _preallocate(self, cache: Any, capacity: int) -> None:
        if self.config.preallocate_kv_cache:
            preallocate(cache, capacity)

    def _generate_chunk(
        self,
        prompt_ids: torch.Tensor,
        prompt_mask: torch.Tensor,
        prompt_pos: torch.Tensor,
        sample_index: torch.Tensor,
        call: int,
        params: dict[str, Any],
        prefix: dict[str, torch.Tensor] | None = None,
        stop_at: int | None = None,
    ) -> dict[str, torch.Tensor]:
        """One chunk of rows, decoded from response position 0 (or, resuming a partial rollout, from the end of the
        kept ``prefix``: its tokens are prefilled with the prompt) up to ``stop_at`` (default: the whole length)."""
        out_device, device, n = prompt_ids.device, self._device(), prompt_ids.shape[0]
        resp_len = params["response_length"]
        stop_at = resp_len if stop_at is None else stop_at
        do_sample, temperature = params["do_sample"], params["temperature"]
        top_k, top_p = params["top_k"], params["top_p"]
        ids, mask, pos = prompt_ids.to(device), prompt_mask.to(device), prompt_pos.to(device)
        eos_ids = torch.tensor(self._stop_ids(), device=device, dtype=ids.dtype)

        responses = torch.full((n, resp_len), self.pad_token_id, dtype=ids.dtype, device=device)
        log_probs = torch.zeros((n, resp_len), dtype=torch.float32, device=device)
        resp_mask = torch.zeros((n, resp_len), dtype=mask.dtype, device=device)
        begin, (ctx_ids, ctx_mask, ctx_pos), finished = self._kept_context(
            (ids, mask, pos), prefix, (responses, log_probs, resp_mask)
        )

        if n > 0 and begin < stop_at and not bool(finished.all()):
            logits, cache = self._prefill(ctx_ids, ctx_mask, ctx_pos, capacity=ids.shape[1] + resp_len)
            retire = self.retire_finished and can_select_rows(cache)
            lean = self._lean if self._lean is not None and is_preallocated(cache) else None
            padded = not bool(ctx_mask.bool().all())  # left-padded prompts: attention needs the key mask
            active = torch.arange(n, device=device)  # chunk rows held by the batch being decoded
            done = finished.to(device)  # per active row
            cur_mask = ctx_mask
            next_pos = pos[:, -1] + 1 + begin
            for step in range(begin, stop_at):
                live = ~done
                tokens, token_logp = self._sample(
                    logits, live, sample_index[active.cpu()], step, call, do_sample, temperature, top_k, top_p
                )
                rows = active[live]
                responses[rows, step] = tokens[live]
                log_probs[rows, step] = token_logp[live]
                resp_mask[rows, step] = 1
                done = done | (live & torch.isin(tokens, eos_ids))
                if step == stop_at - 1 or bool(done.all()):
                    break
                if retire and bool(done.any()):
                    keep = torch.nonzero(~done).squeeze(1)
                    cache = select_rows(cache, keep)
                    active, tokens, cur_mask, next_pos = active[keep], tokens[keep], cur_mask[keep], next_pos[keep]
                    done = done[keep]
                # finished rows (plain path) are fed pad; their outputs are ignored from here on
                feed = torch.where(done, torch.full_like(tokens, self.pad_token_id), tokens)
                cur_mask = torch.cat([cur_mask, cur_mask.new_ones((cur_mask.shape[0], 1))], dim=1)
                if lean is not None:
                    logits = lean.step(feed, next_pos, cache, cur_mask.bool() if padded else None)
                else:
                    logits, cache = self._forward(feed.unsqueeze(1), cur_mask, next_pos.unsqueeze(1), cache)
                next_pos = next_pos + 1
            del cache

        delta = torch.arange(1, resp_len + 1, device=device, dtype=pos.dtype).unsqueeze(0)
        response_pos = pos[:, -1:] + delta
        out = {
            "prompts": ids,
            "responses": responses,
            "input_ids": torch.cat([ids, responses], dim=1),
            "attention_mask": torch.cat([mask, resp_mask], dim=1),
            "position_ids": torch.cat([pos, response_pos], dim=1),
            "response_mask": resp_mask,
            "rollout_log_probs": log_probs,
        }
        return {key: value.to(out_device) for key, value in out.items()}

    def _kept_context(
        self,
        prompt: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        prefix: dict[str, torch.Tensor] | None,
        out: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    ) -> tuple[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
        """A resumed partial rollout: its kept tokens copied into ``out`` (responses, log-probs, mask) and appended
        to the prompt's ids, mask and positions for the prefill; returns how many were kept, that context, and the
        rows already finished (nothing kept: 0, the prompt, none)."""
        ids, mask, pos = prompt
        responses, log_probs, resp_mask = out
        begin = 0 if prefix is None else prefix["responses"].shape[1]
        if not begin:
            return 0, prompt, torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
        responses[:, :begin] = prefix["responses"].to(ids.device)
        log_probs[:, :begin] = prefix["rollout_log_probs"].to(ids.device)
        resp_mask[:, :begin] = prefix["response_mask"].to(ids.device)
        kept_pos = pos[:, -1:] + torch.arange(1, begin + 1, device=ids.device, dtype=pos.dtype)
        context = (
            torch.cat([ids, responses[:, :begin]], dim=1),
            torch.cat([mask, resp_mask[:, :begin]], dim=1),
            torch.cat([pos, kept_pos], dim=1),
        )
        kept = (responses[:, :begin], resp_mask[:, :begin])
        resp_len = responses.shape[1]
        return begin, context, unfinished_rows(*kept, begin, self._stop_ids(), response_length=resp_len).logical_not()

    def _stop_ids(self) -> list[int]:
        # rollout.ignore_eos: no token ends a response early (an empty set matches nothing)
        return [] if self.config.ignore_eos else list(self.eos_token_ids)

    def _sample(
        self,
        logits: torch.Tensor,
        live: torch.Tensor,
        row_keys: torch.Tensor,
        position: int,
        call: int,
        do_sample: bool,
        temperature: float,
        top_k: int,
        top_p: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Next token and its log-prob (under log_softmax(logits / temperature), unfiltered) for each batch row.

        ``row_keys`` are the rows' ``sample_index`` values: each row's draw uses its own keyed uniform.
        """
        if not do_sample:
            logp = torch.log_softmax(logits, dim=-1)
            tokens = logits.argmax(dim=-1)
            return tokens, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        scaled = logits / temperature if temperature != 1.0 else logits
        logp = torch.log_softmax(scaled, dim=-1)
        filtered = filter_logits(scaled, top_k=top_k, top_p=top_p)
        probs = F.softmax(filtered, dim=-1)
        # finished rows get a one-hot dummy distribution on pad: never NaN, and the row's draw is discarded
        dummy = torch.zeros_like(probs[:1])
        dummy[0, self.pad_token_id] = 1.0
        probs = torch.where(live.unsqueeze(-1), probs, dummy)
        u = keyed_uniform(self.seed, call, row_keys, position)
        tokens = sample_inverse_cdf(probs, u).to(logits.device)
        token_logp = logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        return tokens, token_logp
