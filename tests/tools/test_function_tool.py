"""@function_tool: the schema the model reads comes from the signature and the Google-style docstring (compared
with hand-written schemas), the function still runs as a tool (sync in a thread, async on the loop), and a file's
function tools load by path."""

import asyncio
import enum
import textwrap
from typing import Literal, Optional

import pytest

from verl.tools import FunctionTool, ToolResponse, function_tool, load_function_tools, run_tool_call


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


def _dump(tool):
    return tool.get_openai_tool_schema().model_dump(exclude_unset=True, exclude_none=True)


def test_schema_from_signature_and_docstring():
    @function_tool
    def book_table(
        restaurant: str,
        guests: int,
        budget: float = 50.0,
        vegetarian: bool = False,
        dishes: list[str] | None = None,
        notes: Optional[dict] = None,  # noqa: UP045 - the typing spelling users still write
        seating: Literal["inside", "terrace"] = "inside",
        color: Color = Color.RED,
    ) -> str:
        """Book a table at a restaurant.

        The booking is confirmed at once; this paragraph is not part of the description.

        Args:
            restaurant (str): The restaurant's name,
                as listed in the guide.
            guests: How many people.
            budget: Euros per person.
            vegetarian: Only vegetarian dishes.
            dishes: Dishes to pre-order.
            notes: Free-form notes.
            seating: Where to sit.
            color: The tablecloth.

        Returns:
            A confirmation number.
        """
        return "ok"

    assert _dump(book_table) == {
        "type": "function",
        "function": {
            "name": "book_table",
            "description": "Book a table at a restaurant.",
            "parameters": {
                "type": "object",
                "properties": {
                    "restaurant": {"type": "string", "description": "The restaurant's name, as listed in the guide."},
                    "guests": {"type": "integer", "description": "How many people."},
                    "budget": {"type": "number", "description": "Euros per person."},
                    "vegetarian": {"type": "boolean", "description": "Only vegetarian dishes."},
                    "dishes": {"type": "array", "items": {"type": "string"}, "description": "Dishes to pre-order."},
                    "notes": {"type": "object", "description": "Free-form notes."},
                    "seating": {"type": "string", "enum": ["inside", "terrace"], "description": "Where to sit."},
                    "color": {"type": "string", "enum": ["red", "green"], "description": "The tablecloth."},
                },
                "required": ["restaurant", "guests"],
            },
        },
    }
    assert book_table.name == "book_table" and isinstance(book_table, FunctionTool)
    assert book_table("Chez Nous", 2) == "ok"  # still callable as the function


def test_name_and_description_overrides_and_undocumented_parameters():
    @function_tool(name="add", description="Add two integers.")
    def add_numbers(a: int, b: int = 0) -> int:
        return a + b

    assert _dump(add_numbers)["function"] == {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a"],
        },
    }


def _defines(source):
    namespace = {}
    exec(textwrap.dedent(source), namespace)  # a function as a user would write it
    return namespace["f"]


@pytest.mark.parametrize(
    "source, message",
    [
        ("def f(x: int):\n    return x\n", "@function_tool f has no docstring"),
        ('def f(x):\n    """Doc."""\n', "@function_tool f: parameter 'x' has no type hint"),
        ('def f(*xs: int):\n    """Doc."""\n', "@function_tool f: parameter 'xs' cannot be passed by name"),
        ('def f(x: int | str):\n    """Doc."""\n', "has no single JSON type; use one type"),
        ('import typing\ndef f(x: typing.Any):\n    """Doc."""\n', "has no JSON type; use str, int, float"),
        (
            'def f(x: int):\n    """Doc.\n\n    Args:\n        y: gone.\n    """\n',
            "Args describe ['y'], which are not parameters",
        ),
    ],
)
def test_what_the_model_cannot_be_told_is_an_error_at_decoration(source, message):
    with pytest.raises((TypeError, ValueError), match=message.replace("[", r"\[").replace("]", r"\]")):
        function_tool(_defines(source))


def test_sync_and_async_functions_run_through_run_tool_call():
    @function_tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: left factor.
            b: right factor.
        """
        return a * b

    @function_tool
    async def shout(text: str) -> ToolResponse:
        """Upper-case a text."""
        await asyncio.sleep(0)
        return ToolResponse(text=text.upper())

    @function_tool
    def describe(name: str) -> dict:
        """Facts about a name."""
        return {"name": name, "length": len(name)}

    async def main():
        return await asyncio.gather(
            run_tool_call(multiply, "i", {"a": 4821, "b": 37}, timeout_s=5),
            run_tool_call(shout, "i", {"text": "hi"}, timeout_s=5),
            run_tool_call(describe, "i", {"name": "Ada"}, timeout_s=5),
        )

    product, loud, facts = asyncio.run(main())
    assert product.response.text == "178377" and loud.response.text == "HI"
    assert facts.response.text == '{"name": "Ada", "length": 3}'


def test_a_function_returning_none_is_a_bad_return():
    @function_tool
    def forgetful(x: int) -> None:
        """Forgets to return."""

    result = asyncio.run(run_tool_call(forgetful, "i", {"x": 1}, timeout_s=5))
    assert (
        result.error_kind == "bad_return"
        and result.response.text == "Error: forgetful returned NoneType, not a text answer"
    )


def test_a_kwargs_function_receives_the_samples_create_kwargs():
    @function_tool
    def lookup(key: str, **kwargs) -> str:
        """Look a key up in the sample's table.

        Args:
            key: the key.
        """
        return str(kwargs["table"][key])

    assert list(_dump(lookup)["function"]["parameters"]["properties"]) == ["key"]

    async def main():
        instance_id, _ = await lookup.create(create_kwargs={"table": {"a": 1}})
        result = await run_tool_call(lookup, instance_id, {"key": "a"}, timeout_s=5)
        await lookup.release(instance_id)
        return result

    assert asyncio.run(main()).response.text == "1"


def test_loading_a_files_function_tools(tmp_path):
    path = tmp_path / "my_tools.py"
    path.write_text(
        textwrap.dedent(
            '''
            from verl.tools import function_tool

            @function_tool
            def first(x: int) -> int:
                """First tool."""
                return x

            def helper(y):
                return y

            @function_tool(name="second_tool")
            async def second(y: str) -> str:
                """Second tool."""
                return y
            '''
        )
    )
    tools = load_function_tools(str(path))
    assert [t.name for t in tools] == ["first", "second_tool"]


def test_a_file_without_function_tools_says_how_to_make_one(tmp_path):
    path = tmp_path / "plain.py"
    path.write_text("def f(x):\n    return x\n")
    with pytest.raises(ValueError, match="defines no @function_tool functions: decorate each tool function"):
        load_function_tools(str(path))
