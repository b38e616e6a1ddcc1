"""One batched decode of `generate` requests with `HFRollout`'s machinery, each row with its own sampling settings.

The requests' prompts (of different lengths) are left-padded into one batch, prefilled in one forward pass and decoded
one token per step for every unfinished row, through the same prefill, KV cache, retiring and fused decode step as
the trainer's batch call. What differs is per row:

* sampling: greedy rows take the argmax; sampled rows are grouped by ``(temperature, top_k, top_p)`` and each group
  is filtered and drawn exactly as the batch call draws (``filter_logits``, inverse CDF of a keyed uniform);
* randomness: row ``r``'s draw at response position ``t`` is ``keyed_uniform(seed_r, 0, key_r, t)`` with the
  request's key (its number, or its own ``seed``: `request_params`), so it does not depend on the batch;
* length and stopping: a row ends at one of its stop ids (kept as its last token) or after its ``max_tokens``.

Log-probs are those of the batch call: ``log_softmax(logits / temperature)`` of the sampled token, before top-k/top-p
(what the actor recomputes from the same tokens at the same temperature), and ``log_softmax(logits)`` for greedy rows.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from verl.workers.rollout.base import TokenOutput
from verl.workers.rollout.kv_cache import can_select_rows, is_preallocated, select_rows
from verl.workers.rollout.request_params import RequestSpec
from verl.workers.rollout.sampling import filter_logits, keyed_uniform, sample_inverse_cdf

__all__ = ["decode_requests", "left_pad"]


def left_pad(prompts: list[tuple[int, ...]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``input_ids``, ``attention_mask`` and ``position_ids`` (B, max length) of prompts left-padded as the trainer
    pads them: positions count real tokens only."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
        mask[row, width - len(prompt) :] = 1
    return ids, mask, torch.clamp(mask.cumsum(-1) - 1, min=0)


class _RowSampler:
    """Next token and its log-prob for the live rows of a step, each with its request's settings."""

    def __init__(self, requests: list[RequestSpec], device: torch.device):
        settings = [(r.greedy, r.temperature, r.top_k, r.top_p) for r in requests]
        self.groups = list(dict.fromkeys(settings))  # distinct settings, first-seen order
        self.group_of = torch.tensor([self.groups.index(s) for s in settings], device=device)
        self.seeds = torch.tensor([r.seed for r in requests], dtype=torch.int64, device=device)
        self.keys = torch.tensor([r.sample_key for r in requests], dtype=torch.int64, device=device)

    def sample(self, logits: torch.Tensor, rows: torch.Tensor, position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``logits`` (A, V) of requests ``rows`` (A,) -> tokens (A,), log-probs (A,) float32."""
        tokens = torch.empty(rows.shape[0], dtype=torch.long, device=logits.device)
        logps = torch.empty(rows.shape[0], dtype=torch.float32, device=logits.device)
        group_of = self.group_of[rows]
        for g, (greedy, temperature, top_k, top_p) in enumerate(self.groups):
            sel = torch.nonzero(group_of == g).squeeze(1)
            if sel.numel() == 0:
                continue
            part = logits[sel] if len(self.groups) > 1 else logits
            if greedy:
                tok = part.argmax(dim=-1)
                logp = torch.log_softmax(part, dim=-1)
            else:
                scaled = part / temperature if temperature != 1.0 else part
                logp = torch.log_softmax(scaled, dim=-1)
                probs = F.softmax(filter_logits(scaled, top_k=top_k, top_p=top_p), dim=-1)
                keyed = rows[sel]
                u = keyed_uniform(self.seeds[keyed], 0, self.keys[keyed], position)
                tok = sample_inverse_cdf(probs, u).to(part.device)
            tokens[sel] = tok
            logps[sel] = logp.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
        return tokens, logps


def decode_requests(rollout: Any, requests: list[RequestSpec]) -> list[TokenOutput]:
    """The responses of ``requests`` (each ``max_tokens >= 1``) sampled in one batch by ``rollout`` (an `HFRollout`;
    the caller holds its generation session: eval mode, no grad, autocast, fused step refreshed)."""
    device = rollout._device()
    ids, mask, pos = (t.to(device) for t in left_pad([r.prompt_ids for r in requests], rollout.pad_token_id))
    n, max_new = len(requests), max(r.max_tokens for r in requests)
    limits = torch.tensor([r.max_tokens for r in requests], device=device)
    width = max(len(r.stop_token_ids) for r in requests)
    stops = torch.full((n, max(width, 1)), -1, dtype=torch.long, device=device)  # -1 matches no token
    for row, r in enumerate(requests):
        stops[row, : len(r.stop_token_ids)] = torch.tensor(r.stop_token_ids, dtype=torch.long)
    sampler = _RowSampler(requests, device)

    responses = torch.full((n, max_new), rollout.pad_token_id, dtype=torch.long, device=device)
    log_probs = torch.zeros((n, max_new), dtype=torch.float32, device=device)
    lengths = torch.zeros(n, dtype=torch.long, device=device)
    stopped = torch.zeros(n, dtype=torch.bool, device=device)

    logits, cache = rollout._prefill(ids, mask, pos, capacity=ids.shape[1] + max_new)
    retire = rollout.retire_finished and can_select_rows(cache)
    lean = rollout._lean if rollout._lean is not None and is_preallocated(cache) else None
    padded = not bool(mask.bool().all())
    active = torch.arange(n, device=device)  # request rows held by the batch being decoded
    done = torch.zeros(n, dtype=torch.bool, device=device)  # per active row
    cur_mask, next_pos = mask, pos[:, -1] + 1
    for step in range(max_new):
        live = torch.nonzero(~done).squeeze(1)
        rows = active[live]
        tokens, token_logp = sampler.sample(logits[live], rows, step)
        responses[rows, step] = tokens
        log_probs[rows, step] = token_logp
        lengths[rows] += 1
        hit_stop = (tokens.unsqueeze(1) == stops[rows]).any(dim=1)
        stopped[rows] |= hit_stop
        done[live] = hit_stop | (lengths[rows] >= limits[rows])
        if step == max_new - 1 or bool(done.all()):
            break
        feed = torch.full_like(active, rollout.pad_token_id)  # finished rows (plain path) are fed pad
        feed[live] = tokens
        if retire and bool(done.any()):
            keep = torch.nonzero(~done).squeeze(1)
            cache = select_rows(cache, keep)
            active, feed, cur_mask, next_pos, done = (
                active[keep],
                feed[keep],
                cur_mask[keep],
                next_pos[keep],
                done[keep],
            )
        feed = torch.where(done, torch.full_like(feed, rollout.pad_token_id), feed)
        cur_mask = torch.cat([cur_mask, cur_mask.new_ones((cur_mask.shape[0], 1))], dim=1)
        if lean is not None:
            logits = lean.step(feed, next_pos, cache, cur_mask.bool() if padded else None)
        else:
            logits, cache = rollout._forward(feed.unsqueeze(1), cur_mask, next_pos.unsqueeze(1), cache)
        next_pos = next_pos + 1
    del cache

    responses, log_probs, lengths, stopped = responses.cpu(), log_probs.cpu(), lengths.tolist(), stopped.tolist()
    return [
        TokenOutput(
            token_ids=responses[row, : lengths[row]].tolist(),
            log_probs=log_probs[row, : lengths[row]].tolist(),
            stop_reason="completed",
            num_preempted=0,
            finish_reason="stop" if stopped[row] else "length",
        )
        for row in range(n)
    ]
