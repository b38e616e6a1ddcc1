"""The built-in tool task: ``What is 4821 * 37?``, answered by calling the calculator and copying its result.

The products are too long for a 2 MB model to work out in its head (3-4 digits times 2-3 digits by default), so
single-turn success is near zero, while with the calculator the answer is a copy. A row is verl's RL row plus what a
tool task needs::

    {"data_source": "calc_multiply", "prompt": [{"role": "user", "content": "What is 4821 * 37?"}],
     "ability": "math", "reward_model": {"style": "rule", "ground_truth": "178377"},
     "extra_info": {"split": "train", "index": 0, "question": "What is 4821 * 37?", "answer": "#### 178377",
                    "need_tools_kwargs": True,
                    "tools_kwargs": {"calculator": {"create_kwargs": {"ground_truth": "178377"}}}},
     "agent_name": "tool_agent",
     "messages": [user question,
                  {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function":
                      {"name": "calculator", "arguments": "{\\"expression\\": \\"4821*37\\"}"}}]},
                  {"role": "tool", "content": "178377"},
                  {"role": "assistant", "content": "#### 178377"}],
     "tools": [CALCULATOR_TOOL_SCHEMA]}

- ``prompt`` has no tool instructions: the agent loop passes the tool schemas to the chat template, which renders
  them (``apply_chat_template(messages, tools=[...])``), so the same rows serve the tool run and the no-tool run.
- ``messages`` + ``tools`` are the multi-turn SFT demonstration (``data.multiturn.enable=true``): call, the
  calculator's real answer (an integer result prints as an integer), final answer.
- ``create_kwargs`` holds the ground truth as verl's GSM8K tool rows do (a grading tool may use it; the calculator
  ignores it): an empty ``{}`` cannot be stored in parquet (pyarrow writes no struct without fields).
- ``agent_name=single_turn_agent`` (an option) gives the same problems for the no-tool baseline: no ``tools``, the
  demonstration answers directly (``#### N``), no ``tools_kwargs``.
- ``demonstration=direct`` (an option) keeps the tool row (tools offered, ``tools_kwargs``) but its demonstration
  answers without calling: mixed into SFT data it makes a warm start that often does not use the tool it has, the
  habit RL is there to change. The RL columns are the same as ``demonstration=call``'s.

Each operand's digit count is drawn uniformly from its range, then the number uniformly among numbers with that many
digits, so short and long operands are equally common. The final answer is scored by
:mod:`verl.utils.reward_score.calc_multiply` (the ``#### N`` of the last assistant turn).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from verl.data.tasks.base import TaskParam, TaskSpec, check_int

DATA_SOURCE = "calc_multiply"
MAX_DIGITS = 9
AGENT_NAMES = ("tool_agent", "single_turn_agent")
DEMONSTRATIONS = ("call", "direct")
# Spaces up to this many problems are listed in full (exact size checks, uniform sampling).
ENUMERATE_LIMIT = 200_000

# The calculator's OpenAI function schema as the demonstrations render it. The tiny models' chat template shows only
# the name and parameter names, so a tool YAML with other descriptions renders the same prompt.
CALCULATOR_TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression and return its value.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "the expression, e.g. 4821*37"}},
            "required": ["expression"],
        },
    },
}


def digit_range(digits: int) -> tuple[int, int]:
    """Inclusive range of the numbers with ``digits`` digits (1 digit: 0..9)."""
    return (0 if digits == 1 else 10 ** (digits - 1)), 10**digits - 1


def _validate(params: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in ("a", "b"):
        low = check_int(params, f"{side}_min_digits", 1, MAX_DIGITS)
        high = check_int(params, f"{side}_max_digits", 1, MAX_DIGITS)
        if high < low:
            raise ValueError(f"{side}_max_digits ({high}) must be >= {side}_min_digits ({low})")
        out[f"{side}_min_digits"], out[f"{side}_max_digits"] = low, high
    if params["agent_name"] not in AGENT_NAMES:
        raise ValueError(f"agent_name must be one of {AGENT_NAMES}, got {params['agent_name']!r}")
    out["agent_name"] = params["agent_name"]
    if params["demonstration"] not in DEMONSTRATIONS:
        raise ValueError(f"demonstration must be one of {DEMONSTRATIONS}, got {params['demonstration']!r}")
    if params["demonstration"] == "direct" and params["agent_name"] != "tool_agent":
        raise ValueError(
            "demonstration=direct is for agent_name=tool_agent rows (single-turn rows always answer directly)"
        )
    out["demonstration"] = params["demonstration"]
    return out


def _operand_count(params: Mapping[str, Any], side: str) -> int:
    low, _ = digit_range(params[f"{side}_min_digits"])
    _, high = digit_range(params[f"{side}_max_digits"])
    return high - low + 1


def space_size(params: Mapping[str, Any]) -> int:
    """Number of distinct problems (ordered operand pairs)."""
    return _operand_count(params, "a") * _operand_count(params, "b")


def _key(problem: tuple[int, int]) -> str:
    return f"{problem[0]}*{problem[1]}"


def _enumerate(params: Mapping[str, Any]) -> list[tuple[int, int]] | None:
    if space_size(params) > ENUMERATE_LIMIT:
        return None
    a_low, a_high = digit_range(params["a_min_digits"])[0], digit_range(params["a_max_digits"])[1]
    b_low, b_high = digit_range(params["b_min_digits"])[0], digit_range(params["b_max_digits"])[1]
    return [(a, b) for a in range(a_low, a_high + 1) for b in range(b_low, b_high + 1)]


def _draw(rng: random.Random, params: Mapping[str, Any], side: str) -> int:
    digits = rng.randint(params[f"{side}_min_digits"], params[f"{side}_max_digits"])
    return rng.randint(*digit_range(digits))


def _sample(rng: random.Random, params: Mapping[str, Any]) -> tuple[int, int]:
    return _draw(rng, params, "a"), _draw(rng, params, "b")


def _render(problem: tuple[int, int], rng: random.Random, params: Mapping[str, Any]) -> tuple[str, str, str]:
    a, b = problem
    return f"What is {a} * {b}?", f"#### {a * b}", str(a * b)


def tool_call_message(expression: str) -> dict[str, Any]:
    """The assistant turn that asks the calculator for ``expression`` (OpenAI's layout: arguments as JSON text)."""
    call = {"name": "calculator", "arguments": json.dumps({"expression": expression})}
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]}


def _finish_row(row: dict[str, Any], problem: tuple[int, int], params: Mapping[str, Any]) -> dict[str, Any]:
    a, b = problem
    product = str(a * b)
    final = {"role": "assistant", "content": row["extra_info"]["answer"]}
    if params["agent_name"] == "tool_agent":
        if params["demonstration"] == "call":
            messages = [row["prompt"][0], tool_call_message(f"{a}*{b}"), {"role": "tool", "content": product}, final]
        else:  # the calculator is offered, and the demonstration answers without it
            messages = [row["prompt"][0], final]
        row["extra_info"]["need_tools_kwargs"] = True
        row["extra_info"]["tools_kwargs"] = {"calculator": {"create_kwargs": {"ground_truth": product}}}
        tools = [CALCULATOR_TOOL_SCHEMA]
    else:
        messages, tools = [row["prompt"][0], final], []
        row["extra_info"]["need_tools_kwargs"] = False
    return {**row, "agent_name": params["agent_name"], "messages": messages, "tools": tools}


TASK = TaskSpec(
    name="calc_multiply",
    data_source=DATA_SOURCE,
    ability="math",
    params=(
        TaskParam("a_min_digits", 3, int, "fewest digits of the first factor (1 means 0..9)"),
        TaskParam("a_max_digits", 4, int, "most digits of the first factor"),
        TaskParam("b_min_digits", 2, int, "fewest digits of the second factor"),
        TaskParam("b_max_digits", 3, int, "most digits of the second factor"),
        TaskParam("agent_name", "tool_agent", str, "tool_agent (calculator demonstrations) or single_turn_agent"),
        TaskParam(
            "demonstration",
            "call",
            str,
            "tool_agent rows' SFT demonstration: call (the calculator, then the answer) or direct (tools offered, "
            "answered without them)",
        ),
    ),
    validate=_validate,
    key=_key,
    enumerate=_enumerate,
    sample=_sample,
    render=_render,
    enlarge_hint="raise a_max_digits or b_max_digits (or lower the min_digits)",
    description="a * b with long factors, answered by calling the calculator tool; answer '#### N'",
    finish_row=_finish_row,
)
