"""Function tools for actor_rollout_ref.rollout.multi_turn.function_tool_path=<this file>: each @function_tool
function is a tool, its schema read from the signature and the docstring (docs/tools.md)."""

from typing import Literal

from verl.tools import function_tool


@function_tool
def word_count(text: str) -> int:
    """Count the words in a text.

    Args:
        text: the text whose whitespace-separated words are counted.
    """
    return len(text.split())


@function_tool
def unit_convert(value: float, unit: Literal["km", "mi"] = "km") -> str:
    """Convert a distance between kilometres and miles.

    Args:
        value: the distance.
        unit: the unit of value; the answer is in the other one.
    """
    if unit == "km":
        return f"{value / 1.609344:.3f} mi"
    return f"{value * 1.609344:.3f} km"
