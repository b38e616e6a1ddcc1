"""Held-out success on multi-turn demonstrations: the model replays each conversation's assistant turns greedily.

Each assistant turn of a row's ``messages`` is generated from the conversation before it (the demonstration's
earlier turns and tool responses, with the tools shown by the chat template). A turn before the last must be exactly
the demonstration's (for the tool task: exactly the right calculator call, ending its turn); the last turn is scored
by the row's scorer (``data_source``, ``reward_model.ground_truth``), or must match exactly when the row has none.
A row succeeds when all its turns do.

Because a matching turn is the demonstration's text token for token, the context of the next turn is then exactly
what the model itself would have produced, and the tool response in it is the one the tool returns for that call
(the demonstrations hold the tool's real output). So for a deterministic tool this is the end-to-end greedy success
of the agent loop, except that a call worded differently but equally right (``37*4821``) counts as a failure: a lower
bound. It needs no tool and no agent loop, which is why the SFT trainer and the warm-start script use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from verl.utils.dataset.chat_segments import check_messages, drop_nulls, tokenize_conversation
from verl.utils.dataset.parquet import Row, get_nested


@dataclass
class _Turn:
    row: int
    context: list[int]  # every token before the turn, its generation prompt included
    expected: list[int]  # the demonstration's turn, up to and including the end-of-turn token
    final: bool


@torch.no_grad()
def greedy_continue(
    model, tokenizer, contexts: Sequence[list[int]], max_new_tokens: Sequence[int], batch_size: int = 64
) -> list[list[int]]:
    """Greedy continuation ids of each context (cut after the first EOS), batched by similar length."""
    was_training = model.training
    model.eval()
    order = sorted(range(len(contexts)), key=lambda i: len(contexts[i]))
    out: list[list[int]] = [[] for _ in contexts]
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    try:
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            width = max(len(contexts[i]) for i in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for b, i in enumerate(chunk):  # left padding: generation appends on the right
                ids[b, width - len(contexts[i]) :] = torch.tensor(contexts[i])
                mask[b, width - len(contexts[i]) :] = 1
            generated = model.generate(
                input_ids=ids.to(model.device),
                attention_mask=mask.to(model.device),
                max_new_tokens=max(max_new_tokens[i] for i in chunk),
                do_sample=False,
                pad_token_id=pad,
                eos_token_id=eos,
            )[:, width:].tolist()
            for b, i in enumerate(chunk):
                seq = generated[b][: max_new_tokens[i]]
                out[i] = seq[: seq.index(eos) + 1] if eos in seq else seq
    finally:
        model.train(was_training)
    return out


def _turns(tokenizer, rows: Sequence[Row], messages_key: str, tools_key: str) -> list[_Turn]:
    eos = tokenizer.eos_token_id
    turns = []
    for r, row in enumerate(rows):
        messages = check_messages(get_nested(row, messages_key), row.where)
        tools = drop_nulls(row.data.get(tools_key)) or None
        segments = tokenize_conversation(tokenizer, messages, tools, row.where)
        last = max(i for i, s in enumerate(segments) if s.role == "assistant")
        context: list[int] = []
        for i, segment in enumerate(segments):
            if segment.role == "assistant":
                # a template may write more after the end-of-turn token (Qwen: "\n"); the model stops at EOS
                expected = segment.target_ids
                expected = expected[: expected.index(eos) + 1] if eos in expected else expected
                turns.append(_Turn(r, context + segment.prompt_ids, expected, i == last))
            context = context + segment.ids
    return turns


def evaluate_replay_success(
    model,
    tokenizer,
    rows: Sequence[Row],
    messages_key: str = "messages",
    tools_key: str = "tools",
    max_new_tokens: int = 32,
    batch_size: int = 64,
    compute_score: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """Replay every row (see the module docstring). Returns ``acc`` (rows whose every turn succeeds), ``turn_acc``
    (turns before the last that match exactly: the tool calls), ``final_acc`` (last turns scoring >= 1 given the
    demonstration's context), ``acc/<data_source>``, ``num_samples``, ``row_success`` (one bool per row),
    ``final_success`` (per row: its last turn alone, given the demonstration's context) and a few ``samples``."""
    if not rows:
        raise ValueError("evaluation: no rows to replay (an empty validation file?)")
    if compute_score is None:
        from verl.utils.reward_score import default_compute_score as compute_score
    turns = _turns(tokenizer, rows, messages_key, tools_key)
    budgets = [len(t.expected) if not t.final else max(len(t.expected), max_new_tokens) for t in turns]
    generated = greedy_continue(model, tokenizer, [t.context for t in turns], budgets, batch_size)
    ok = [True] * len(rows)
    final_ok = [False] * len(rows)
    early, finals, samples = [], [], []
    for turn, ids in zip(turns, generated):
        row = rows[turn.row]
        if turn.final and "reward_model" in row.data:
            truth = get_nested(row, "reward_model.ground_truth")
            text = tokenizer.decode(ids, skip_special_tokens=True)
            result = compute_score(row.data.get("data_source"), text, truth, row.data.get("extra_info"))
            success = float(result["score"] if isinstance(result, dict) else result) >= 1.0
        else:
            success = ids == turn.expected
        (finals if turn.final else early).append(success)
        ok[turn.row] = ok[turn.row] and success
        if turn.final:
            final_ok[turn.row] = success
        if turn.final and len(samples) < 5:
            samples.append(
                {
                    "prompt": tokenizer.decode(turn.context),
                    "response": tokenizer.decode(ids, skip_special_tokens=True),
                    "ground_truth": row.data.get("reward_model", {}).get("ground_truth"),
                    "score": float(success),
                }
            )
    result: dict[str, Any] = {
        "acc": sum(ok) / len(ok),
        "turn_acc": sum(early) / len(early) if early else 1.0,
        "final_acc": sum(finals) / len(finals),
        "num_samples": len(rows),
        "row_success": ok,
        "final_success": final_ok,
        "samples": samples,
    }
    by_source: dict[str, list[bool]] = {}
    for row, success in zip(rows, ok):
        by_source.setdefault(row.data.get("data_source", "unknown"), []).append(success)
    result.update({f"acc/{source}": sum(hits) / len(hits) for source, hits in by_source.items()})
    return result


@torch.no_grad()
def first_turn_token_probability(
    model, tokenizer, rows: Sequence[Row], token: str, messages_key: str = "messages", tools_key: str = "tools"
) -> list[float]:
    """Per row: the probability that the model's first assistant turn starts with ``token`` (e.g. ``<tool_call>``),
    given the conversation before that turn with the row's tools rendered. For a tool task this is how often a
    sampled (temperature 1) first turn calls a tool, which greedy decoding alone does not show: a policy that calls in
    49% of its samples never calls greedily."""
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id is None or token_id == tokenizer.unk_token_id:
        raise ValueError(f"first_turn_token_probability: {token!r} is not one token of this tokenizer")
    firsts = {}
    for turn in _turns(tokenizer, rows, messages_key, tools_key):
        firsts.setdefault(turn.row, turn.context)
    was_training = model.training
    model.eval()
    try:
        probs = []
        for r in range(len(rows)):
            logits = model(torch.tensor([firsts[r]], device=model.device)).logits[0, -1].float()
            probs.append(torch.softmax(logits, dim=-1)[token_id].item())
    finally:
        model.train(was_training)
    return probs
