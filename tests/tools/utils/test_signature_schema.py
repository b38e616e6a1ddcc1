"""Google-style docstring parsing and type-hint mapping, the parts of @function_tool's schema reading."""

from typing import Literal

import pytest

from verl.tools.utils.signature_schema import json_schema_of, parse_google_docstring


def test_summary_is_the_first_paragraph_and_args_join_continuations():
    doc = """Look up a price
    in the shop.

    Longer text that is not the summary.

    Args:
        item (str): the item,
            e.g. "apple".
        quantity: how many.
        *args: ignored.

    Raises:
        KeyError: never documented as a parameter.
    """
    summary, args = parse_google_docstring(doc)
    assert summary == "Look up a price in the shop."
    assert args == {"item": 'the item, e.g. "apple".', "quantity": "how many.", "args": "ignored."}


def test_no_docstring_and_no_args_section():
    assert parse_google_docstring(None) == ("", {})
    assert parse_google_docstring("Only a summary.") == ("Only a summary.", {})


@pytest.mark.parametrize(
    "hint, schema",
    [
        (list[list[int]], {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}),
        (tuple[float, ...], {"type": "array", "items": {"type": "number"}}),
        (dict[str, int], {"type": "object"}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (bool | None, {"type": "boolean"}),
    ],
)
def test_type_hints(hint, schema):
    assert json_schema_of(hint, "p") == schema


@pytest.mark.parametrize("hint", [Literal["a", 1], tuple[int, str], bytes])
def test_hints_without_one_json_type_fail(hint):
    with pytest.raises(TypeError, match="^p: "):
        json_schema_of(hint, "p")
