"""One ``generate`` request checked and resolved: vLLM-style ``sampling_params`` into the settings a decode uses.

An agent loop passes ``sampling_params`` as verl's servers take them (vLLM's ``SamplingParams`` names). Every key is
either honoured, accepted at its neutral value only (a penalty of 0, ``n`` of 1, ...: anything else would sample
another distribution), accepted as text-only with nothing to do on token ids, or an error naming the key. A key
not given takes the rollout config's value (``actor_rollout_ref.rollout``), so a request without sampling params
samples as the trainer's batch call does.

Everything here is checked before the request joins a batch: a bad request fails alone, with its ``request_id``
in the message, and never reaches the model.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["RequestSpec", "resolve_request"]

# drawn from the rollout's seed: sample_index = _REQUEST_KEY | request number; a request with its own ``seed``:
# sample_index = _SEEDED_KEY. Batch rows use sample_index < 2**62, so the streams never meet.
_REQUEST_KEY = 1 << 62
_SEEDED_KEY = (1 << 62) | (1 << 61)

# accepted only at the value that changes nothing (vLLM's defaults)
_NEUTRAL = {
    "n": (1,),
    "best_of": (None, 1),
    "repetition_penalty": (1.0,),
    "presence_penalty": (0.0,),
    "frequency_penalty": (0.0,),
    "min_p": (0.0,),
    "min_tokens": (0,),
    "stop": (None, [], (), ""),
    "prompt_logprobs": (None,),
    "logit_bias": (None, {}),
    "bad_words": (None, []),
}
# text-side options: the response's token ids and log-probs are the same whatever they say
_TEXT_ONLY = ("detokenize", "skip_special_tokens", "spaces_between_special_tokens", "include_stop_str_in_output")
_HONOURED = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "max_new_tokens",
    "do_sample",
    "seed",
    "stop_token_ids",
    "ignore_eos",
    "logprobs",
)


@dataclass(frozen=True)
class RequestSpec:
    """A checked request: what one row of a batched decode needs."""

    request_id: str
    prompt_ids: tuple[int, ...]
    max_tokens: int  # tokens to sample at most (>= 0)
    greedy: bool  # argmax; log-probs then at temperature 1
    temperature: float  # 1.0 when greedy
    top_k: int  # <= 0: off
    top_p: float  # >= 1: off
    stop_token_ids: tuple[int, ...]  # any of them ends the response (and is its last token)
    seed: int  # the draws' seed: the rollout's, or the request's own
    sample_key: int  # the draws' row key (see _REQUEST_KEY)


def _fail(request_id: str, message: str) -> ValueError:
    return ValueError(f"rollout generate request {request_id!r}: {message}")


def _token_ids(request_id: str, what: str, ids: Any, vocab_size: int | None) -> tuple[int, ...]:
    if isinstance(ids, torch.Tensor):
        if ids.dim() != 1 or ids.is_floating_point() or ids.is_complex():
            raise _fail(request_id, f"{what} must be a 1-D integer list of token ids, got a tensor {tuple(ids.shape)}")
        values = ids.tolist()
    elif isinstance(ids, np.ndarray):
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise _fail(
                request_id, f"{what} must be a 1-D integer list of token ids, got an array {ids.shape} {ids.dtype}"
            )
        values = ids.tolist()
    elif isinstance(ids, Sequence) and not isinstance(ids, str | bytes):
        values = list(ids)
    else:
        raise _fail(request_id, f"{what} must be a list of token ids, got {type(ids).__name__}")
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, numbers.Integral)]
    if bad:
        raise _fail(request_id, f"{what} must hold integer token ids, got {bad[0]!r}")
    values = [int(v) for v in values]
    out_of_range = [v for v in values if v < 0 or (vocab_size is not None and v >= vocab_size)]
    if out_of_range:
        raise _fail(request_id, f"{what} holds id {out_of_range[0]} outside the vocabulary [0, {vocab_size})")
    return tuple(values)


def _number(request_id: str, key: str, value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(request_id, f"sampling_params[{key!r}] must be a number, got {value!r}")
    if kind is int and not isinstance(value, numbers.Integral) and float(value) != int(value):  # ints > 2**53 exact
        raise _fail(request_id, f"sampling_params[{key!r}] must be an integer, got {value!r}")
    value = kind(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(request_id, f"sampling_params[{key!r}] must be finite, got {value!r}")
    return value


def _check_keys(request_id: str, params: Mapping[str, Any]) -> None:
    """Every key honoured, text-only, or at its neutral value; else an error naming the first that is not."""
    unknown = sorted(k for k in params if k not in _HONOURED and k not in _NEUTRAL and k not in _TEXT_ONLY)
    if unknown:
        raise _fail(
            request_id,
            f"sampling_params key {unknown[0]!r} is not supported by this engine; supported: "
            f"{', '.join(_HONOURED)} (and at their neutral values only: {', '.join(_NEUTRAL)})",
        )
    for key, neutral in _NEUTRAL.items():
        if key in params and params[key] not in neutral:
            raise _fail(
                request_id,
                f"sampling_params[{key!r}]={params[key]!r} is not supported: only {neutral[0]!r} (this engine samples "
                "one response per request from the temperature/top-k/top-p distribution, without penalties)",
            )


def _prompt_and_room(
    request_id: str, prompt_ids: Any, vocab_size: int | None, max_model_len: int | None
) -> tuple[tuple[int, ...], int | None]:
    """The checked prompt and the tokens ``max_model_len`` leaves after it (None: no cap); at least one."""
    prompt = _token_ids(request_id, "prompt_ids", prompt_ids, vocab_size)
    if not prompt:
        raise _fail(request_id, "prompt_ids is empty: a response is sampled after at least one prompt token")
    room = None if max_model_len is None else int(max_model_len) - len(prompt)
    if room is not None and room < 1:
        raise _fail(
            request_id,
            f"the prompt has {len(prompt)} tokens; the model's maximum length is {max_model_len} "
            "(rollout.max_model_len; unset: hf the model's max_position_embeddings, vllm prompt_length + "
            "response_length), which leaves no room for a response: shorten the prompt or raise rollout.max_model_len",
        )
    return prompt, room


def _max_tokens(request_id: str, params: Mapping[str, Any], config: Any, prompt_len: int, room: int | None) -> int:
    """``max_tokens`` (or ``max_new_tokens``; default: verl's budget for the prompt), capped at ``room``."""
    if "max_tokens" in params and "max_new_tokens" in params:
        raise _fail(request_id, "give max_tokens or max_new_tokens, not both")
    budget = params.get("max_tokens", params.get("max_new_tokens"))
    if budget is None:
        budget = int(config.response_length) + int(config.prompt_length) - prompt_len
    else:
        budget = _number(request_id, "max_tokens", budget, int)
        if budget < 0:
            raise _fail(request_id, f"max_tokens must be >= 0, got {budget}")
    return max(0, budget if room is None else min(budget, room))


def _flag(request_id: str, params: Mapping[str, Any], key: str, default: Any) -> bool:
    value = params.get(key, default)
    if not isinstance(value, bool):
        raise _fail(request_id, f"{key} must be true or false, got {value!r}")
    return value


def _sampling(request_id: str, params: Mapping[str, Any], config: Any) -> tuple[bool, float, int, float]:
    """(greedy, temperature, top_k, top_p), each the request's or else the rollout config's."""
    temperature = _number(request_id, "temperature", params.get("temperature", config.temperature), float)
    top_k = _number(request_id, "top_k", params.get("top_k", config.top_k), int)
    top_p = _number(request_id, "top_p", params.get("top_p", config.top_p), float)
    if not 0.0 < top_p <= 1.0:
        raise _fail(request_id, f"top_p must be in (0, 1], got {top_p}")
    do_sample = _flag(request_id, params, "do_sample", config.do_sample)
    return temperature <= 0.0 or not do_sample, temperature, top_k, top_p


def _stop_token_ids(
    request_id: str, params: Mapping[str, Any], config: Any, eos_token_ids: Sequence[int], vocab_size: int | None
) -> tuple[int, ...]:
    """The end-of-sequence ids (unless ``ignore_eos``) and the request's ``stop_token_ids``, each once, in order."""
    ignore_eos = _flag(request_id, params, "ignore_eos", config.ignore_eos)
    extra_stops = _token_ids(request_id, "stop_token_ids", params.get("stop_token_ids") or [], vocab_size)
    return tuple(dict.fromkeys(([] if ignore_eos else [int(e) for e in eos_token_ids]) + list(extra_stops)))


def _own_seed(request_id: str, params: Mapping[str, Any]) -> int | None:
    """The request's ``seed`` (None: the rollout's seeds its draws)."""
    own_seed = params.get("seed")
    if own_seed is not None:
        own_seed = _number(request_id, "seed", own_seed, int)
        if not 0 <= own_seed < 2**63:
            raise _fail(request_id, f"seed must be in [0, 2**63), got {own_seed}")
    return own_seed


def resolve_request(
    request_id: str,
    prompt_ids: Any,
    sampling_params: Mapping[str, Any] | None,
    *,
    config: Any,
    eos_token_ids: Sequence[int],
    number: int,
    seed: int,
    vocab_size: int | None,
    max_model_len: int | None,
) -> RequestSpec:
    """``sampling_params`` of request ``number`` resolved against the rollout ``config`` (a ``RolloutConfig``).

    ``max_tokens`` (or sglang's ``max_new_tokens``) defaults to verl's budget ``response_length + prompt_length -
    len(prompt_ids)``; either is capped so the prompt and response fit ``max_model_len`` (None: no cap). A prompt
    leaving no room for one token is an error. ``temperature <= 0`` or ``do_sample=False`` is greedy.
    """
    params = dict(sampling_params or {})
    _check_keys(request_id, params)
    prompt, room = _prompt_and_room(request_id, prompt_ids, vocab_size, max_model_len)
    max_tokens = _max_tokens(request_id, params, config, len(prompt), room)
    greedy, temperature, top_k, top_p = _sampling(request_id, params, config)
    stops = _stop_token_ids(request_id, params, config, eos_token_ids, vocab_size)
    own_seed = _own_seed(request_id, params)
    return RequestSpec(
        request_id=str(request_id),
        prompt_ids=prompt,
        max_tokens=max_tokens,
        greedy=greedy,
        temperature=1.0 if greedy else temperature,
        top_k=top_k,
        top_p=top_p,
        stop_token_ids=stops,
        seed=int(seed) if own_seed is None else own_seed,
        sample_key=_REQUEST_KEY | int(number) if own_seed is None else _SEEDED_KEY,
    )
