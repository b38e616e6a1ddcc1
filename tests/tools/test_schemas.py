"""verl's schema models: the OpenAI shape is checked when built, extra JSON-schema keys survive to the chat
template, and a ToolResponse's media are lists."""

import pytest
from pydantic import ValidationError

from verl.tools.schemas import (
    OpenAIFunctionCallSchema,
    OpenAIFunctionParsedSchema,
    OpenAIFunctionToolSchema,
    ToolResponse,
)


def _schema(**function):
    return {"type": "function", "function": {"name": "f", "description": "d", **function}}


def test_dump_is_the_openai_tools_entry_with_extra_keys_kept():
    entry = _schema(
        parameters={
            "type": "object",
            "properties": {"xs": {"type": "array", "items": {"type": "integer"}, "description": "numbers"}},
            "required": ["xs"],
        }
    )
    assert OpenAIFunctionToolSchema.model_validate(entry).model_dump(exclude_unset=True, exclude_none=True) == entry


def test_parameters_default_to_none():
    schema = OpenAIFunctionToolSchema.model_validate(_schema())
    assert schema.function.parameters.properties == {} and schema.function.parameters.required == []


@pytest.mark.parametrize(
    "entry, message",
    [
        ({**_schema(), "type": "retrieval"}, 'type must be "function"'),
        (_schema(name="two words"), "function.name must be a non-empty name without spaces"),
        (_schema(parameters={"type": "object", "properties": {}, "required": ["x"]}), "required names \\['x'\\]"),
        (_schema(parameters={"type": "string", "properties": {}}), 'parameters.type must be "object"'),
        (_schema(parameters={"type": "object", "properties": {"x": {"description": "no type"}}}), "type"),
    ],
)
def test_shapes_that_are_not_openai_function_tools_fail(entry, message):
    with pytest.raises(ValidationError, match=message):
        OpenAIFunctionToolSchema.model_validate(entry)


def test_parsed_call_arguments_decode_or_flag_an_error():
    ok, bad = OpenAIFunctionCallSchema.from_openai_function_parsed_schema(
        OpenAIFunctionParsedSchema(name="f", arguments='{"a": 1}')
    )
    assert ok.arguments == {"a": 1} and bad is False
    for text in ("{oops", "[1]"):
        call, bad = OpenAIFunctionCallSchema.from_openai_function_parsed_schema(
            OpenAIFunctionParsedSchema(name="f", arguments=text)
        )
        assert call.arguments == {} and bad is True


def test_tool_response():
    assert ToolResponse().is_empty() and ToolResponse(text="a").is_text_only()
    assert not ToolResponse(text="a", image=["img"]).is_text_only()
    with pytest.raises(
        ValidationError, match=r"ToolResponse.image must be a list, got str: wrap a single image as \[image\]"
    ):
        ToolResponse(image="img")
