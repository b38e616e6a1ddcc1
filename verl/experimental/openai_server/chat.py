"""``POST /v1/chat/completions``: the request read and checked, and the response (or its stream chunks) built.

The request path is the agent loop's: messages and tools through the model's chat template (`chat_prompt`), the
prompt's ids to the rollout's ``generate`` (`generation`), the response text through the hermes tool parser
(`tool_calls`). Fields beyond OpenAI's that vLLM's server also takes: ``top_k``, ``stop_token_ids``, ``ignore_eos``,
``chat_template_kwargs``, ``add_generation_prompt`` and ``continue_final_message``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verl.experimental.agent_loop.tool_parser import ToolParser
from verl.experimental.chat_prompt import ChatFormatError, normalize_messages, normalize_tools, render_chat_prompt
from verl.experimental.openai_server.errors import RequestError
from verl.experimental.openai_server.fields import check_known, get_bool, require_neutral
from verl.experimental.openai_server.generation import Choice
from verl.experimental.openai_server.sampling import SAMPLING_FIELDS, Sampling, read_sampling
from verl.experimental.openai_server.tool_calls import parse_reply

__all__ = [
    "CHAT_FIELDS",
    "ChatRequest",
    "chat_chunks",
    "chat_response",
    "read_chat_request",
    "role_chunk",
    "stream_flags",
    "token_logprobs",
    "usage",
]

CHAT_FIELDS = (
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "stream",
    "stream_options",
    "logprobs",
    "top_logprobs",
    "response_format",
    "user",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
    *SAMPLING_FIELDS,
)
TOOL_FORMAT = "hermes"  # <tool_call>{json}</tool_call>, the agent loop's default format


@dataclass
class ChatRequest:
    """A checked chat request."""

    prompt_ids: list[int]
    sampling: Sampling
    max_tokens: int
    stream: bool
    include_usage: bool
    logprobs: bool
    parser: ToolParser | None  # None: no tools offered, or tool_choice "none" -- the text is all content
    parallel_tool_calls: bool


def stream_flags(body: Mapping[str, Any]) -> tuple[bool, bool]:
    """``stream`` and ``stream_options.include_usage``."""
    stream = get_bool(body, "stream", False)
    options = body.get("stream_options")
    if options is None:
        return stream, False
    if not stream:
        raise RequestError("stream_options is only allowed with stream: true", param="stream_options")
    if not isinstance(options, Mapping) or any(k != "include_usage" for k in options):
        raise RequestError('stream_options supports {"include_usage": true|false} only', param="stream_options")
    return stream, get_bool(options, "include_usage", False)


def _tool_parser(body: Mapping[str, Any], tools: list | None, tokenizer: Any) -> ToolParser | None:
    choice = body.get("tool_choice")
    if choice not in (None, "auto", "none"):
        raise RequestError(
            f'tool_choice={choice!r} is not supported: use "auto" (the model decides) or "none"; forcing a call '
            '("required" or a named function) needs constrained decoding, which the engines here do not do',
            param="tool_choice",
        )
    if choice is not None and not tools:
        raise RequestError("tool_choice is set but the request has no tools", param="tool_choice")
    return ToolParser.get_tool_parser(TOOL_FORMAT, tokenizer) if tools and choice != "none" else None


def read_chat_request(body: Mapping[str, Any], tokenizer: Any, max_model_len: int, vocab_size: int) -> ChatRequest:
    """``body`` checked field by field; a bad one is a `RequestError` naming it."""
    check_known(body, CHAT_FIELDS, "chat/completions")
    if "messages" not in body:
        raise RequestError("missing required field 'messages' (a list of {role, content} objects)", param="messages")
    require_neutral(body, "response_format", (None, {"type": "text"}), "structured output is not supported")
    require_neutral(body, "top_logprobs", (None, 0), "only the sampled token's log-prob is returned")
    stream, include_usage = stream_flags(body)
    template_kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(template_kwargs, Mapping):
        raise RequestError("chat_template_kwargs must be an object", param="chat_template_kwargs")
    try:
        messages = normalize_messages(body["messages"])
        tools = normalize_tools(body.get("tools"))
        continue_final = get_bool(body, "continue_final_message", False)
        prompt_ids = render_chat_prompt(
            tokenizer,
            messages,
            tools,
            add_generation_prompt=get_bool(body, "add_generation_prompt", not continue_final),
            continue_final_message=continue_final,
            template_kwargs=template_kwargs,
        )
    except ChatFormatError as e:
        raise RequestError(str(e), param=e.param) from e
    sampling = read_sampling(body, vocab_size)
    return ChatRequest(
        prompt_ids=prompt_ids,
        sampling=sampling,
        max_tokens=sampling.budget(len(prompt_ids), max_model_len),
        stream=stream,
        include_usage=include_usage,
        logprobs=get_bool(body, "logprobs", False),
        parser=_tool_parser(body, tools, tokenizer),
        parallel_tool_calls=get_bool(body, "parallel_tool_calls", True),
    )


def token_logprobs(tokenizer: Any, choice: Choice) -> list[dict[str, Any]]:
    """OpenAI's ``logprobs.content``: each token's text, log-prob and bytes (no alternatives: ``top_logprobs`` [])."""
    out = []
    for token, logprob in zip(choice.token_ids, choice.log_probs or []):
        text = tokenizer.decode([token])
        out.append({"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8")), "top_logprobs": []})
    return out


def _message(request: ChatRequest, choice: Choice) -> tuple[dict[str, Any], str]:
    """The choice's assistant message and finish reason."""
    reply = parse_reply(request.parser, choice.text)
    calls = reply.tool_calls[:1] if not request.parallel_tool_calls else reply.tool_calls
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if calls:
        message["tool_calls"] = calls
    return message, "tool_calls" if calls else choice.finish_reason


def usage(prompt_tokens: int, choices: list[Choice]) -> dict[str, int]:
    completion = sum(len(c.token_ids) for c in choices)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion, "total_tokens": prompt_tokens + completion}


def chat_response(
    request: ChatRequest, choices: list[Choice], tokenizer: Any, *, request_id: str, model: str, created: int
) -> dict[str, Any]:
    """The ``chat.completion`` object."""
    out = []
    for choice in choices:
        message, finish = _message(request, choice)
        logprobs = {"content": token_logprobs(tokenizer, choice)} if request.logprobs else None
        out.append({"index": choice.index, "message": message, "logprobs": logprobs, "finish_reason": finish})
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": out,
        "usage": usage(len(request.prompt_ids), choices),
    }


def chat_chunks(
    request: ChatRequest, choices: list[Choice], tokenizer: Any, *, request_id: str, model: str, created: int
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects that follow the role chunks: per choice its content (with its
    log-probs), its tool calls, its finish reason; then the usage when asked for."""

    def chunk(index: int, delta: dict, finish: str | None = None, logprobs: Any = None) -> dict[str, Any]:
        return {
            "id": request_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
        }

    out = []
    for choice in choices:
        message, finish = _message(request, choice)
        logprobs = {"content": token_logprobs(tokenizer, choice)} if request.logprobs else None
        if message["content"] or logprobs:
            out.append(chunk(choice.index, {"content": message["content"] or ""}, logprobs=logprobs))
        for k, call in enumerate(message.get("tool_calls", [])):
            out.append(chunk(choice.index, {"tool_calls": [{"index": k, **call}]}))
        out.append(chunk(choice.index, {}, finish))
    if request.include_usage:
        out.append(
            {
                "id": request_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage(len(request.prompt_ids), choices),
            }
        )
    return out


def role_chunk(index: int, *, request_id: str, model: str, created: int) -> dict[str, Any]:
    """The first chunk of a streamed choice, sent before its tokens are ready."""
    return {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [
            {"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        ],
    }
