"""OpenAI sampling fields -> the rollout's per-request ``sampling_params`` (vLLM's names, `request_params`).

Supported, with OpenAI's defaults: ``temperature`` (1.0; 0 is greedy), ``top_p`` (1.0), ``max_tokens`` /
``max_completion_tokens`` (default: what fits the context after the prompt), ``n`` (1..`MAX_N`), ``seed`` and
``stop`` (strings); vLLM's extensions ``top_k``, ``stop_token_ids`` and ``ignore_eos``. ``presence_penalty``,
``frequency_penalty``, ``repetition_penalty``, ``min_tokens`` and ``logit_bias`` are accepted at their neutral values
only -- anything else is a 400 naming the field, since the engines sample without penalties.

``n`` choices are ``n`` requests to ``generate`` (batched together by the engine). Without a ``seed`` each draws from
the server's seed keyed by its request number; with one, choice ``i`` uses ``seed + i``, so a seeded request gives
the same choices whenever it is sent.

``stop`` strings are matched in the decoded text after generation (the engines stop on token ids only): the text is cut
before the first match and the usage counts the tokens up to and including it. The result is what stopping early would
give -- a response's tokens do not depend on what comes after them -- at the cost of decoding up to ``max_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verl.experimental.openai_server.errors import RequestError
from verl.experimental.openai_server.fields import get_bool, get_int_list, get_number, get_str_list, require_neutral

__all__ = ["MAX_N", "SAMPLING_FIELDS", "Sampling", "read_sampling"]

MAX_N = 64  # choices per request at most
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "max_completion_tokens",
    "n",
    "seed",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "min_tokens",
    "logit_bias",
)
_NO_PENALTIES = "the engines sample from the temperature/top-k/top-p distribution, without penalties"


@dataclass(frozen=True)
class Sampling:
    """A request's checked sampling settings."""

    temperature: float
    top_p: float
    top_k: int
    max_tokens: int | None  # asked for; None: what fits after the prompt
    n: int
    seed: int | None
    stop: tuple[str, ...]
    stop_token_ids: tuple[int, ...]
    ignore_eos: bool | None

    def budget(self, prompt_tokens: int, max_model_len: int) -> int:
        """Tokens to generate for a prompt of ``prompt_tokens``; a prompt or ``max_tokens`` over the context is a 400."""
        room = max_model_len - prompt_tokens
        if room < 1:
            raise RequestError(
                f"the prompt has {prompt_tokens} tokens; this model's context length is {max_model_len}, which leaves "
                "no room for a response: shorten the prompt",
                param="messages",
                code="context_length_exceeded",
            )
        if self.max_tokens is None:
            return room
        if self.max_tokens > room:
            raise RequestError(
                f"max_tokens={self.max_tokens} with the prompt's {prompt_tokens} tokens exceeds this model's context "
                f"length of {max_model_len}: ask for at most {room}",
                param="max_tokens",
                code="context_length_exceeded",
            )
        return self.max_tokens

    def params(self, choice: int, max_tokens: int) -> dict[str, Any]:
        """``sampling_params`` for the rollout's ``generate`` of choice ``choice``."""
        params: dict[str, Any] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "max_tokens": max_tokens,
        }
        if self.seed is not None:
            params["seed"] = (self.seed + choice) % 2**63
        if self.stop_token_ids:
            params["stop_token_ids"] = list(self.stop_token_ids)
        if self.ignore_eos is not None:
            params["ignore_eos"] = self.ignore_eos
        return params


def read_sampling(body: Mapping[str, Any], vocab_size: int) -> Sampling:
    """The sampling fields of ``body`` (see the module docstring), checked."""
    for key in ("presence_penalty", "frequency_penalty", "min_tokens"):
        require_neutral(body, key, (None, 0), _NO_PENALTIES)
    require_neutral(body, "repetition_penalty", (None, 1), _NO_PENALTIES)
    require_neutral(body, "logit_bias", (None, {}), _NO_PENALTIES)
    if body.get("max_tokens") is not None and body.get("max_completion_tokens") is not None:
        raise RequestError("give max_tokens or max_completion_tokens, not both", param="max_completion_tokens")
    key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    stop_token_ids = get_int_list(body, "stop_token_ids")
    bad = [t for t in stop_token_ids if not 0 <= t < vocab_size]
    if bad:
        raise RequestError(f"stop_token_ids holds {bad[0]}, outside the vocabulary [0, {vocab_size})", "stop_token_ids")
    top_k = get_number(body, "top_k", -1, integer=True, low=-1)
    if top_k == 0:
        top_k = -1  # vLLM and verl both write 0 or -1 for "off"
    return Sampling(
        temperature=get_number(body, "temperature", 1.0, low=0.0, high=2.0),
        top_p=get_number(body, "top_p", 1.0, low=0.0, high=1.0, low_open=True),
        top_k=top_k,
        max_tokens=get_number(body, key, None, integer=True, low=1),
        n=get_number(body, "n", 1, integer=True, low=1, high=MAX_N),
        seed=get_number(body, "seed", None, integer=True, low=0, high=2**63 - 1),
        stop=tuple(get_str_list(body, "stop")),
        stop_token_ids=tuple(stop_token_ids),
        ignore_eos=get_bool(body, "ignore_eos", None) if body.get("ignore_eos") is not None else None,
    )
