"""``POST /v1/completions``: raw prompts (no chat template), read and checked, and the response or its chunks.

``prompt`` is a string, a list of strings, a list of token ids or a list of such lists; each prompt gets ``n``
choices, numbered ``prompt_index * n + i`` as OpenAI numbers them. ``echo`` puts the prompt's text before each
choice's text. ``logprobs: 0`` returns each sampled token's log-prob (``tokens``, ``token_logprobs``,
``text_offset``); asking for alternatives (``logprobs >= 1``), or log-probs with ``echo`` (the prompt's log-probs),
is a 400. ``suffix`` (insertion) and ``best_of`` > 1 are not supported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verl.experimental.openai_server.chat import stream_flags
from verl.experimental.openai_server.errors import RequestError
from verl.experimental.openai_server.fields import check_known, get_bool, get_number, require_neutral
from verl.experimental.openai_server.generation import Choice
from verl.experimental.openai_server.sampling import SAMPLING_FIELDS, Sampling, read_sampling

__all__ = [
    "COMPLETION_FIELDS",
    "CompletionRequest",
    "completion_chunks",
    "completion_response",
    "read_completion_request",
]

COMPLETION_FIELDS = (
    "model",
    "prompt",
    "suffix",
    "echo",
    "logprobs",
    "best_of",
    "stream",
    "stream_options",
    "user",
    *SAMPLING_FIELDS,
)


@dataclass
class CompletionRequest:
    """A checked completion request: one entry per prompt in ``prompts`` (token ids) and ``prompt_texts``."""

    prompts: list[list[int]]
    prompt_texts: list[str]
    sampling: Sampling
    max_tokens: list[int]  # per prompt
    stream: bool
    include_usage: bool
    echo: bool
    logprobs: bool


def _prompts(value: Any, tokenizer: Any, vocab_size: int) -> list[list[int]]:
    """``prompt`` as token-id lists."""
    if isinstance(value, str):
        value = [value]
    elif isinstance(value, list) and value and all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        value = [value]
    if not isinstance(value, list) or not value:
        raise RequestError(
            "prompt must be a string, a list of strings, a list of token ids or a list of token-id lists", "prompt"
        )
    out = []
    for i, prompt in enumerate(value):
        if isinstance(prompt, str):
            ids = list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        elif isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            bad = [t for t in prompt if not 0 <= t < vocab_size]
            if bad:
                raise RequestError(
                    f"prompt[{i}] holds token id {bad[0]}, outside the vocabulary [0, {vocab_size})", "prompt"
                )
            ids = list(prompt)
        else:
            raise RequestError(f"prompt[{i}] must be a string or a list of token ids", "prompt")
        if not ids:
            raise RequestError(f"prompt[{i}] is empty: a completion is sampled after at least one token", "prompt")
        out.append(ids)
    return out


def read_completion_request(
    body: Mapping[str, Any], tokenizer: Any, max_model_len: int, vocab_size: int
) -> CompletionRequest:
    """``body`` checked field by field; a bad one is a `RequestError` naming it."""
    check_known(body, COMPLETION_FIELDS, "completions")
    if "prompt" not in body:
        raise RequestError("missing required field 'prompt'", param="prompt")
    require_neutral(body, "suffix", (None, ""), "insertion is not supported")
    require_neutral(body, "best_of", (None, 1), "one sample per choice; use n for more choices")
    logprobs = get_number(body, "logprobs", None, integer=True, low=0)
    if logprobs not in (None, 0):
        raise RequestError(
            f"logprobs={logprobs} is not supported: use 0 (each sampled token's log-prob, no alternatives)", "logprobs"
        )
    echo = get_bool(body, "echo", False)
    if echo and logprobs is not None:
        raise RequestError("echo with logprobs would need the prompt's log-probs, which are not computed", "echo")
    stream, include_usage = stream_flags(body)
    prompts = _prompts(body["prompt"], tokenizer, vocab_size)
    sampling = read_sampling(body, vocab_size)
    return CompletionRequest(
        prompts=prompts,
        prompt_texts=[tokenizer.decode(p) for p in prompts] if echo else [""] * len(prompts),
        sampling=sampling,
        max_tokens=[sampling.budget(len(p), max_model_len) for p in prompts],
        stream=stream,
        include_usage=include_usage,
        echo=echo,
        logprobs=logprobs is not None,
    )


def _logprobs(tokenizer: Any, choice: Choice) -> dict[str, Any]:
    tokens = [tokenizer.decode([t]) for t in choice.token_ids]
    offsets, at = [], 0
    for token in tokens:
        offsets.append(at)
        at += len(token)
    return {
        "tokens": tokens,
        "token_logprobs": list(choice.log_probs or []),
        "top_logprobs": None,
        "text_offset": offsets,
    }


def _choices(request: CompletionRequest, per_prompt: list[list[Choice]], tokenizer: Any) -> list[dict[str, Any]]:
    n = request.sampling.n
    out = []
    for p, choices in enumerate(per_prompt):
        for choice in choices:
            out.append(
                {
                    "index": p * n + choice.index,
                    "text": request.prompt_texts[p] + choice.text,
                    "logprobs": _logprobs(tokenizer, choice) if request.logprobs else None,
                    "finish_reason": choice.finish_reason,
                }
            )
    return out


def _usage(request: CompletionRequest, per_prompt: list[list[Choice]]) -> dict[str, int]:
    prompt = sum(len(p) for p in request.prompts)
    completion = sum(len(c.token_ids) for choices in per_prompt for c in choices)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion_response(
    request: CompletionRequest,
    per_prompt: list[list[Choice]],
    tokenizer: Any,
    *,
    request_id: str,
    model: str,
    created: int,
) -> dict[str, Any]:
    """The ``text_completion`` object."""
    return {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": _choices(request, per_prompt, tokenizer),
        "usage": _usage(request, per_prompt),
    }


def completion_chunks(
    request: CompletionRequest,
    per_prompt: list[list[Choice]],
    tokenizer: Any,
    *,
    request_id: str,
    model: str,
    created: int,
) -> list[dict[str, Any]]:
    """The streamed ``text_completion`` chunks: per choice its text, then its finish reason; then the usage."""
    head = {"id": request_id, "object": "text_completion", "created": created, "model": model}
    out = []
    for choice in _choices(request, per_prompt, tokenizer):
        out.append({**head, "choices": [{**choice, "finish_reason": None}]})
        out.append(
            {
                **head,
                "choices": [
                    {"index": choice["index"], "text": "", "logprobs": None, "finish_reason": choice["finish_reason"]}
                ],
            }
        )
    if request.include_usage:
        out.append({**head, "choices": [], "usage": _usage(request, per_prompt)})
    return out
