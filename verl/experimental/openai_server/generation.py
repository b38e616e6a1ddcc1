"""A request's choices: ``n`` calls of the rollout's ``async generate`` (the engine batches them with every other
request in flight), decoded to text, cut at ``stop`` strings, with the token counts the usage reports."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from verl.experimental.openai_server.errors import RequestError
from verl.experimental.openai_server.sampling import Sampling

__all__ = ["Choice", "generate_choices"]


@dataclass
class Choice:
    """One generated response."""

    index: int
    token_ids: list[int]  # the tokens the response is made of (cut at a stop string), its stop token included
    log_probs: list[float] | None  # one per token_ids entry: log-prob under the sampling distribution
    text: str  # decoded without special tokens, cut before a stop string
    finish_reason: str  # "stop" (a stop token or string) | "length" (max_tokens reached)


def _cut_at_stop(tokenizer: Any, ids: list[int], text: str, stops: tuple[str, ...]) -> tuple[list[int], str] | None:
    """``(ids, text)`` cut at the first of ``stops`` in ``text`` (the stop string excluded from the text, the tokens up
    to the one that completes it kept), or None when no stop string occurs."""
    hits = [(text.find(s), s) for s in stops if s in text]
    if not hits:
        return None
    at, stop = min(hits)
    end = at + len(stop)
    lo, hi = 1, len(ids)  # the fewest tokens whose text reaches the end of the stop string (decoded text only grows)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(tokenizer.decode(ids[:mid], skip_special_tokens=True)) >= end:
            hi = mid
        else:
            lo = mid + 1
    return ids[:lo], text[:at]


async def generate_choices(
    rollout: Any, tokenizer: Any, prompt_ids: list[int], sampling: Sampling, max_tokens: int, request_id: str
) -> list[Choice]:
    """``sampling.n`` responses to ``prompt_ids``, in choice order."""
    calls = [
        rollout.generate(list(prompt_ids), sampling.params(i, max_tokens), f"{request_id}-{i}")
        for i in range(sampling.n)
    ]
    try:
        outputs = await asyncio.gather(*calls)
    except ValueError as e:
        if not str(e).startswith("rollout generate request"):  # not the request check: an engine failure, a 500
            raise
        raise RequestError(str(e)) from e  # the rollout's own request check (request_params): a bad request
    choices = []
    for i, out in enumerate(outputs):
        if out.stop_reason == "aborted":
            raise RuntimeError(f"the engine aborted request {request_id}-{i} (finish_reason {out.finish_reason!r})")
        ids = list(out.token_ids)
        log_probs = list(out.log_probs) if out.log_probs is not None else None
        text = tokenizer.decode(ids, skip_special_tokens=True)
        finish = "stop" if out.finish_reason == "stop" else "length"
        cut = _cut_at_stop(tokenizer, ids, text, sampling.stop) if sampling.stop else None
        if cut is not None:
            ids, text = cut
            log_probs = log_probs[: len(ids)] if log_probs is not None else None
            finish = "stop"
        choices.append(Choice(index=i, token_ids=ids, log_probs=log_probs, text=text, finish_reason=finish))
    return choices
