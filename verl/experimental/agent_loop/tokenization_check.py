"""The tokenization sanity check (verl's ``multi_turn.tokenization_sanity_check_mode``): a finished trajectory's ids --
the model's own tokens plus the turns appended between them -- against the chat template's rendering of the whole
conversation, tokenized at once.

They differ when the template renders a message otherwise than it was appended (a template that rewrites earlier
assistant turns, e.g. dropping reasoning), or when the model's tokens are not how the tokenizer would split their
text. Training uses the trajectory's ids either way (that is what the model saw and sampled); a difference means
inference with the same template would show the model another context. Modes, as verl's:

- ``strict``: every difference is reported;
- ``ignore_strippable``: differences whose text on both sides is only whitespace are not;
- ``disable``: no check.

Reporting: a warning (verl's behaviour) naming the differing spans, and the per-trajectory metric
``agent_loop/tokenization_mismatch`` (share of trajectories with a reported difference).
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass
from typing import Any

from verl.experimental.agent_loop.chat_turns import ChatTurns

logger = logging.getLogger(__name__)

__all__ = ["SANITY_CHECK_MODES", "TokenDiff", "check_tokenization", "token_diffs"]

SANITY_CHECK_MODES = ("strict", "ignore_strippable", "disable")
_MAX_WARNINGS = 5  # per process: after these, mismatches show in the metric only
_warned = 0


@dataclass
class TokenDiff:
    """One differing span: ``expected[i1:i2]`` (the template's rendering) where the trajectory has
    ``actual[j1:j2]``, with both spans' text."""

    i1: int
    i2: int
    j1: int
    j2: int
    expected_text: str
    actual_text: str

    @property
    def strippable(self) -> bool:
        return not self.expected_text.strip() and not self.actual_text.strip()

    def __str__(self) -> str:
        return f"ids {self.i1}:{self.i2} -> {self.j1}:{self.j2}: template {self.expected_text!r}, trajectory {self.actual_text!r}"


def token_diffs(expected: list[int], actual: list[int], tokenizer: Any) -> list[TokenDiff]:
    """The spans where ``actual`` differs from ``expected`` (difflib's opcodes over the ids, decoded)."""
    matcher = difflib.SequenceMatcher(None, expected, actual, autojunk=False)
    out = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            decode = tokenizer.decode
            texts = decode(expected[i1:i2], skip_special_tokens=False), decode(actual[j1:j2], skip_special_tokens=False)
            out.append(TokenDiff(i1, i2, j1, j2, *texts))
    return out


def check_tokenization(
    mode: str,
    turns: ChatTurns,
    messages: list[dict],
    tools: list[dict] | None,
    actual_ids: list[int],
    last_model_turn: tuple[list[int], bool] | None,
    where: str,
) -> list[TokenDiff]:
    """The reported differences (see the module docstring) of a trajectory whose conversation is ``messages`` and
    whose ids are ``actual_ids``; ``last_model_turn`` is ``(ids, stopped)`` when the conversation ends with the
    model's turn (the template's closing of that turn is then added to ``actual_ids`` before comparing).
    ``where`` names the trajectory in the warning."""
    if mode == "disable":
        return []
    if mode not in SANITY_CHECK_MODES:
        raise ValueError(
            f"actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode={mode!r}: use one of "
            f"{', '.join(SANITY_CHECK_MODES)}"
        )
    ends_with_model = last_model_turn is not None
    expected = turns.encode(turns.render(messages, tools, add_generation_prompt=not ends_with_model))
    actual = list(actual_ids)
    if ends_with_model:
        ids, stopped = last_model_turn
        actual += turns.encode(turns.bridge_after(ids, stopped))
    diffs = token_diffs(expected, actual, turns.tokenizer)
    if mode == "ignore_strippable":
        diffs = [d for d in diffs if not d.strippable]
    global _warned
    if diffs and _warned < _MAX_WARNINGS:
        _warned += 1
        shown = "; ".join(str(d) for d in diffs[:3]) + (f"; ... {len(diffs) - 3} more" if len(diffs) > 3 else "")
        logger.warning(
            "%s: the trajectory's token ids differ from the chat template's rendering of its conversation "
            "(tokenization_sanity_check_mode=%s): %s. Training uses the trajectory's ids; check the chat template "
            "(docs/agent_loop.md, 'Token in, token out')%s",
            where,
            mode,
            shown,
            "" if _warned < _MAX_WARNINGS else "; further mismatches only count in agent_loop/tokenization_mismatch",
        )
    return diffs
