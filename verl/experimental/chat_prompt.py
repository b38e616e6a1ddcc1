"""OpenAI-format chat messages and tools -> the prompt's token ids, through the model's own chat template.

One request path for everything that turns a conversation into ids for the rollout's ``generate``: the
OpenAI-compatible server (`verl.experimental.openai_server`) and, where it renders messages, the agent loop. Both
must render a conversation the same way, or a policy trained through one is served a different prompt by the other.

OpenAI's wire format and Hugging Face chat templates disagree in small ways; `normalize_messages` bridges them as
vLLM's server does:

- ``content`` may be a list of parts (``[{"type": "text", "text": ...}]``): the text parts are joined; image or audio
  parts are an error (the engines here are text-only); ``None`` (an assistant turn that only calls tools) becomes "";
- an assistant turn's ``tool_calls[i].function.arguments`` is JSON *text* on the wire, while templates (Qwen2.5's
  ``arguments | tojson``) expect an object: it is parsed, and text that is not a JSON object is an error naming it;
- ``developer`` (OpenAI's newer name for the system role) becomes ``system``.

A template that does not render what it is given fails silently in most stacks -- tool calling that "never happens"
because the model never saw the tools. `render_chat_prompt` checks the rendered text: tools given but the text is the
same without them, or a tool result / a called function's name missing from it, is a `ChatFormatError` saying the
chat template does not render them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["ChatFormatError", "normalize_messages", "normalize_tools", "render_chat_prompt"]

ROLES = ("system", "developer", "user", "assistant", "tool")


class ChatFormatError(ValueError):
    """A conversation that cannot be rendered; ``param`` is the offending field's path (``messages[2].content``)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


def _text_content(content: Any, where: str) -> str:
    """A message's ``content`` (text, a list of parts, or None) as one text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ChatFormatError(
            f"{where} must be a string or a list of content parts, got {type(content).__name__}", where
        )
    texts = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind != "text":
            raise ChatFormatError(
                f"{where}[{i}] is a {kind or type(part).__name__!s} part: only text parts "
                '({"type": "text", "text": "..."}) are supported (the engines here are text-only)',
                f"{where}[{i}]",
            )
        if not isinstance(part.get("text"), str):
            raise ChatFormatError(f"{where}[{i}].text must be a string", f"{where}[{i}].text")
        texts.append(part["text"])
    return "".join(texts)


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    """An assistant turn's OpenAI ``tool_calls`` with each ``arguments`` parsed to an object (what templates render)."""
    if not isinstance(calls, list):
        raise ChatFormatError(f"{where} must be a list of tool calls, got {type(calls).__name__}", where)
    out = []
    for i, call in enumerate(calls):
        at = f"{where}[{i}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str) or not function["name"]:
            raise ChatFormatError(
                f'{at} needs {{"type": "function", "function": {{"name": ..., "arguments": "<JSON object>"}}}}', at
            )
        arguments = function.get("arguments", "{}")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as e:
                raise ChatFormatError(
                    f"{at}.function.arguments is not valid JSON ({e.msg} at character {e.pos})",
                    f"{at}.function.arguments",
                ) from e
        if not isinstance(arguments, dict):
            raise ChatFormatError(
                f"{at}.function.arguments must be a JSON object, got {type(arguments).__name__}",
                f"{at}.function.arguments",
            )
        entry = {"type": "function", "function": {"name": function["name"], "arguments": arguments}}
        if isinstance(call.get("id"), str):
            entry["id"] = call["id"]
        out.append(entry)
    return out


def normalize_messages(messages: Any) -> list[dict[str, Any]]:
    """OpenAI chat ``messages`` as a chat template expects them (see the module docstring); a malformed message is
    a `ChatFormatError` naming it."""
    if not isinstance(messages, list) or not messages:
        raise ChatFormatError("messages must be a non-empty list of {role, content} objects", "messages")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise ChatFormatError(f"{where} must be an object with role and content", where)
        role = message.get("role")
        if role not in ROLES:
            raise ChatFormatError(f"{where}.role is {role!r}: use one of {', '.join(ROLES)}", f"{where}.role")
        if "content" not in message and not (role == "assistant" and message.get("tool_calls")):
            raise ChatFormatError(f"{where} has no content", f"{where}.content")
        entry: dict[str, Any] = {
            "role": "system" if role == "developer" else role,
            "content": _text_content(message.get("content"), f"{where}.content"),
        }
        if role == "assistant" and message.get("tool_calls"):
            entry["tool_calls"] = _tool_calls(message["tool_calls"], f"{where}.tool_calls")
        for key in ("name", "tool_call_id"):
            if message.get(key) is not None:
                if not isinstance(message[key], str):
                    raise ChatFormatError(f"{where}.{key} must be a string", f"{where}.{key}")
                entry[key] = message[key]
        out.append(entry)
    return out


def normalize_tools(tools: Any) -> list[dict[str, Any]] | None:
    """OpenAI ``tools`` (``[{"type": "function", "function": {"name", "description", "parameters"}}]``), checked;
    None or [] -> None."""
    if tools is None or tools == []:
        return None
    if not isinstance(tools, list):
        raise ChatFormatError(f"tools must be a list, got {type(tools).__name__}", "tools")
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if (
            not isinstance(tool, Mapping)
            or tool.get("type", "function") != "function"
            or not isinstance(function, Mapping)
        ):
            raise ChatFormatError(
                f'{where} must be {{"type": "function", "function": {{"name": ..., "parameters": {{...}}}}}}', where
            )
        if not isinstance(function.get("name"), str) or not function["name"]:
            raise ChatFormatError(f"{where}.function.name must be a non-empty string", f"{where}.function.name")
        if "parameters" in function and not isinstance(function["parameters"], Mapping):
            raise ChatFormatError(
                f"{where}.function.parameters must be a JSON Schema object", f"{where}.function.parameters"
            )
    return [dict(tool) for tool in tools]


def _render(tokenizer: Any, messages: list[dict], tools: list[dict] | None, **kwargs: Any) -> str:
    try:
        return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, **kwargs)
    except Exception as e:  # jinja raises its own types (TemplateError, UndefinedError, ...); the caller needs why
        raise ChatFormatError(f"the model's chat template failed on these messages: {type(e).__name__}: {e}") from e


def render_chat_prompt(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    template_kwargs: Mapping[str, Any] | None = None,
) -> list[int]:
    """The token ids of ``messages`` (already `normalize_messages`-ed) rendered by ``tokenizer``'s chat template
    with ``tools``; ``continue_final_message``: the last (assistant) message is left open for the model to go on.

    The text is tokenized without special tokens added (the template writes them), as the trainer tokenizes prompts.
    Raises `ChatFormatError` when the template drops the tools, a tool result or a called function's name."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ChatFormatError(
            "the model has no chat template (tokenizer_config.json / chat_template.jinja): use /v1/completions with a "
            "raw prompt, or add a template to the model directory"
        )
    if continue_final_message and (add_generation_prompt or messages[-1]["role"] != "assistant"):
        raise ChatFormatError(
            "continue_final_message needs the last message to be the assistant's and add_generation_prompt false",
            "continue_final_message",
        )
    kwargs = dict(template_kwargs or {})
    kwargs.update(add_generation_prompt=add_generation_prompt, continue_final_message=continue_final_message)
    text = _render(tokenizer, list(messages), list(tools) if tools else None, **kwargs)
    if tools and text == _render(tokenizer, list(messages), None, **kwargs):
        raise ChatFormatError(
            "the model's chat template does not render `tools`: the model would never see them. Serve a model whose "
            "template renders tools (Qwen2.5-style), or describe the tools in a system message",
            "tools",
        )
    for i, message in enumerate(messages):
        if message["role"] == "tool" and message["content"].strip() not in text:
            raise ChatFormatError(
                f"the model's chat template does not render tool messages (messages[{i}] is missing from the prompt)",
                f"messages[{i}]",
            )
        for j, call in enumerate(message.get("tool_calls") or []):
            if call["function"]["name"] not in text:
                raise ChatFormatError(
                    f"the model's chat template does not render an assistant's tool_calls (messages[{i}].tool_calls[{j}] "
                    "is missing from the prompt)",
                    f"messages[{i}].tool_calls[{j}]",
                )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
