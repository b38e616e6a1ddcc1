"""Token ids of chat turns for token-in-token-out trajectories: the prompt, and the turns appended after the model's.

A multi-turn trajectory is never re-tokenized: the model's turns are the ids it sampled, and only the messages placed
between them (tool results, simulated-user turns) are rendered and tokenized, as verl does it: the new messages alone
through the chat template with the generation prompt, minus the system block a template adds on its own (found as
verl finds it: the rendering of one empty user turn minus one more turn).

One thing verl leaves out is added here: the text the template puts after an assistant message's end-of-turn token
(Qwen's ``<|im_end|>`` is followed by ``\\n``). The model stops at the end-of-turn token, so that text is in no turn;
`bridge_after` returns it and the next appended turn starts with it. The trajectory's ids then equal the template's
rendering of the whole conversation, which the tokenization sanity check compares (`tokenization_check`).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

__all__ = ["ChatTurns"]

_MARK = "\u2063AGENT_LOOP_CONTENT\u2063"  # stands for an assistant message's content when finding its closing text


class ChatTurns:
    """Renders and tokenizes chat turns with one tokenizer's chat template (one instance per tokenizer: `of`)."""

    _instances: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    _lock = threading.Lock()

    def __init__(self, tokenizer: Any):
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"{type(tokenizer).__name__} has no chat template: multi-turn agent loops render tool and user turns "
                "with it. Add chat_template to the tokenizer directory's tokenizer_config.json (or a "
                "chat_template.jinja file)"
            )
        self.tokenizer = tokenizer
        self.system_prefix = self._system_prefix()
        self.assistant_closing = self._assistant_closing()

    @classmethod
    def of(cls, tokenizer: Any) -> ChatTurns:
        """The instance for ``tokenizer`` (built once: finding the system prefix renders the template)."""
        with cls._lock:
            try:
                turns = cls._instances.get(tokenizer)
            except TypeError:  # not weak-referenceable: no cache
                return cls(tokenizer)
            if turns is None:
                turns = cls._instances[tokenizer] = cls(tokenizer)
            return turns

    # -------------------------------------------------------------------------------------------- rendering
    def render(self, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True) -> str:
        try:
            return self.tokenizer.apply_chat_template(
                messages, tools=tools or None, add_generation_prompt=add_generation_prompt, tokenize=False
            )
        except Exception as e:  # jinja2's errors name no message
            roles = [m.get("role") for m in messages]
            raise ValueError(f"the chat template rejected messages with roles {roles}: {type(e).__name__}: {e}") from e

    def encode(self, text: str) -> list[int]:
        """``text``'s ids as the dataset tokenizes a rendered prompt (no special tokens added)."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
        """The prompt: ``messages`` (and the tools' OpenAI schemas, for templates that show them) with the
        generation prompt."""
        return self.encode(self.render(messages, tools, add_generation_prompt=True))

    def delta_ids(self, messages: list[dict], bridge: str = "") -> list[int]:
        """Ids of ``messages`` appended to a conversation, ending with the generation prompt: ``bridge`` (see
        `bridge_after`), then the messages rendered alone without the template's own system block."""
        text = self.render(messages, add_generation_prompt=True)
        if self.system_prefix and text.startswith(self.system_prefix):
            text = text[len(self.system_prefix) :]
        return self.encode(bridge + text)

    def bridge_after(self, model_ids: list[int], stopped: bool) -> str:
        """The template's text after an assistant message that the model did not produce: what follows its stop
        token (``"\\n"`` after Qwen's ``<|im_end|>``); the whole closing when the turn was cut at the length limit."""
        if not stopped:
            return self.assistant_closing
        stop_text = self.tokenizer.decode(model_ids[-1:], skip_special_tokens=False) if model_ids else ""
        if stop_text and self.assistant_closing.startswith(stop_text):
            return self.assistant_closing[len(stop_text) :]
        return ""

    def assistant_content(self, model_ids: list[int]) -> str:
        """The text of a model turn as an assistant message holds it (special tokens such as the stop token
        dropped)."""
        return self.tokenizer.decode(model_ids, skip_special_tokens=True)

    # -------------------------------------------------------------------------------------------- template facts
    def _system_prefix(self) -> str:
        """The text a template puts before the first message when none is a system message (verl's
        ``initialize_system_prompt``: one empty user turn minus what a second one adds)."""
        try:
            one = self.render([{"role": "user", "content": ""}], add_generation_prompt=False)
            two = self.render([{"role": "user", "content": ""}] * 2, add_generation_prompt=False)
        except ValueError:  # e.g. a template requiring alternating roles: assume no system block of its own
            return ""
        turn = len(two) - len(one)
        return one[: len(one) - turn] if 0 < turn <= len(one) else ""

    def _assistant_closing(self) -> str:
        """What the template writes after an assistant message's content (Qwen: ``<|im_end|>\\n``)."""
        try:
            text = self.render(
                [{"role": "user", "content": "q"}, {"role": "assistant", "content": _MARK}], add_generation_prompt=False
            )
        except ValueError:
            return ""
        at = text.rfind(_MARK)
        return text[at + len(_MARK) :] if at >= 0 else ""
