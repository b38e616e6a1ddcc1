"""A conversation as token segments, one per message, cut where the chat template's rendering of each prefix ends.

Multi-turn SFT trains on the assistant's tokens only, and the agent loop builds its trajectories by appending the
tokens of each new message to what came before. Both need the same cut: message k's tokens are the rendering of
messages ``[:k+1]`` minus the rendering of ``[:k]``; for an assistant message the generation prompt (``[:k]`` rendered
with ``add_generation_prompt=True``, e.g. ``<|im_start|>assistant\\n``) is split off, since the model is given it and
never writes it. Tokenizing piece by piece gives the ids a token-in-token-out trajectory has; :func:`check_ids` says
whether they equal one tokenization of the whole text.

This only works with templates whose rendering of a prefix is a prefix of the rendering of the longer conversation;
a template that renders earlier turns differently once later ones exist (Qwen3's thinking templates drop earlier
``<think>`` blocks) is refused with the message index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ChatSegment:
    """One message's tokens: ``prompt_ids`` (the whole message unless it is the assistant's: then its generation
    prompt) and ``target_ids`` (the assistant's own tokens: content, tool calls, end of turn; empty otherwise)."""

    role: str
    prompt_ids: list[int]
    target_ids: list[int] = field(default_factory=list)

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.target_ids

    @property
    def loss_mask(self) -> list[int]:
        return [0] * len(self.prompt_ids) + [1] * len(self.target_ids)


def drop_nulls(value: Any) -> Any:
    """``value`` without the ``None`` entries of its dicts, recursively. A parquet column of dicts has the union of
    every row's keys, the missing ones read back as None; a template would render those (``calculator(expression,
    key)``), so they go."""
    if isinstance(value, dict):
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [drop_nulls(v) for v in value]
    return value


def check_messages(messages: Any, where: str) -> list[dict[str, Any]]:
    """The messages of one row, cleaned (:func:`drop_nulls`), or a ValueError naming the row and what is wrong."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError(f"{where}: messages must be a non-empty list of {{'role', 'content'}} dicts, got {messages!r}")
    cleaned = drop_nulls(list(messages))
    for i, message in enumerate(cleaned):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValueError(f"{where}: message {i} must be a dict with a 'role' string, got {message!r}")
        content = message.get("content")
        if not (isinstance(content, str) or (content is None and message.get("tool_calls"))):
            raise ValueError(
                f"{where}: message {i} ({message['role']}) needs a 'content' string (only an assistant message "
                f"with tool_calls may leave it out), got {content!r}"
            )
    if cleaned[0]["role"] == "assistant":
        raise ValueError(f"{where}: the conversation starts with an assistant message; start with a system or user one")
    if not any(m["role"] == "assistant" for m in cleaned):
        raise ValueError(f"{where}: no assistant message, so nothing to train on")
    return cleaned


def _render(tokenizer, messages, tools, add_generation_prompt: bool, where: str, kwargs: dict[str, Any]) -> str:
    try:
        return tokenizer.apply_chat_template(
            messages, tools=tools or None, add_generation_prompt=add_generation_prompt, tokenize=False, **kwargs
        )
    except Exception as e:  # jinja2 errors name no row
        raise ValueError(
            f"{where}: the chat template rejected messages {[m.get('role') for m in messages]}: {type(e).__name__}: {e}"
        ) from e


def _not_prefix(where: str, index: int, role: str, what: str) -> ValueError:
    return ValueError(
        f"{where}: the chat template renders the conversation up to message {index - 1} differently once message "
        f"{index} ({role}) follows ({what}); multi-turn SFT and the agent loop need a template whose rendering of "
        "a conversation's first messages is a prefix of the rendering of the whole (the tiny models' tool template "
        "is one; Qwen3 thinking templates are not)"
    )


def tokenize_conversation(
    tokenizer,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] | None = None,
    where: str = "a conversation",
    **template_kwargs: Any,
) -> list[ChatSegment]:
    """One :class:`ChatSegment` per message of ``messages`` (already checked), tools rendered by the template."""
    segments: list[ChatSegment] = []
    before = ""  # the rendering of the messages so far
    for i, message in enumerate(messages):
        upto = _render(tokenizer, messages[: i + 1], tools, False, where, template_kwargs)
        if not upto.startswith(before):
            raise _not_prefix(where, i, message["role"], "its text changes")
        if message["role"] == "assistant":
            prompted = _render(tokenizer, messages[:i], tools, True, where, template_kwargs)
            if not (prompted.startswith(before) and upto.startswith(prompted)):
                raise _not_prefix(where, i, "assistant", "the generation prompt is not where the turn starts")
            segments.append(
                ChatSegment(
                    message["role"],
                    _encode(tokenizer, prompted[len(before) :]),
                    _encode(tokenizer, upto[len(prompted) :]),
                )
            )
        else:
            segments.append(ChatSegment(message["role"], _encode(tokenizer, upto[len(before) :])))
        before = upto
    return segments


def _encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


def check_ids(tokenizer, segments: Sequence[ChatSegment], messages, tools, **template_kwargs: Any) -> bool:
    """Whether the segments' ids equal one tokenization of the whole conversation's text (verl's sanity check)."""
    whole = tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False, **template_kwargs)
    return [t for s in segments for t in s.ids] == _encode(tokenizer, whole)
