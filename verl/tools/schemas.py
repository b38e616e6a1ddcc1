"""The OpenAI function-tool schema and a tool's answer, as verl's pydantic models (``verl.tools.schemas``).

A tool is described to the model by one entry of the OpenAI ``tools`` list, which the chat template renders into the
prompt (``tokenizer.apply_chat_template(messages, tools=[schema.model_dump(exclude_unset=True, exclude_none=True)])``)::

    {"type": "function",
     "function": {"name": "calculator", "description": "...",
                  "parameters": {"type": "object",
                                 "properties": {"expression": {"type": "string", "description": "..."}},
                                 "required": ["expression"]}}}

The models check that shape when a tool is built (``type`` must be ``function``, ``parameters.type`` must be
``object``, every ``required`` name must be a property), so a wrong YAML fails at load time and not as a tool call
the model can never make. A property may carry more JSON-schema keys than verl's three (``items``, ``minimum``...):
they are kept and reach the chat template.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "OpenAIFunctionCallSchema",
    "OpenAIFunctionParametersSchema",
    "OpenAIFunctionParsedSchema",
    "OpenAIFunctionPropertySchema",
    "OpenAIFunctionSchema",
    "OpenAIFunctionToolCall",
    "OpenAIFunctionToolSchema",
    "ToolResponse",
]


class OpenAIFunctionPropertySchema(BaseModel):
    """One parameter: its JSON type (``string``, ``integer``, ``number``, ``boolean``, ``array``, ``object``), what
    it means, and the allowed values if it is an enum. Other JSON-schema keys (``items``, ``default``...) pass
    through."""

    model_config = ConfigDict(extra="allow")

    type: str
    description: str | None = None
    enum: list[Any] | None = None


class OpenAIFunctionParametersSchema(BaseModel):
    """The parameters object: ``type`` is always ``object``; ``required`` names properties the call must give."""

    model_config = ConfigDict(extra="allow")

    type: str
    properties: dict[str, OpenAIFunctionPropertySchema]
    required: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _an_object_whose_required_names_exist(self) -> OpenAIFunctionParametersSchema:
        if self.type != "object":
            raise ValueError(f'parameters.type must be "object" (OpenAI function schema), got {self.type!r}')
        unknown = [name for name in self.required if name not in self.properties]
        if unknown:
            raise ValueError(
                f"parameters.required names {unknown}, which are not in parameters.properties "
                f"({sorted(self.properties)}): add them to properties or drop them from required"
            )
        return self


class OpenAIFunctionSchema(BaseModel):
    """A function: the name the model calls, the description it reads, and its parameters."""

    name: str
    description: str
    parameters: OpenAIFunctionParametersSchema = Field(
        default_factory=lambda: OpenAIFunctionParametersSchema(type="object", properties={}, required=[])
    )
    strict: bool = False

    @model_validator(mode="after")
    def _a_callable_name(self) -> OpenAIFunctionSchema:
        if not self.name or any(c.isspace() for c in self.name):
            raise ValueError(f"function.name must be a non-empty name without spaces, got {self.name!r}")
        return self


class OpenAIFunctionToolSchema(BaseModel):
    """One entry of the OpenAI ``tools`` list: ``{"type": "function", "function": {...}}``."""

    type: str
    function: OpenAIFunctionSchema

    @model_validator(mode="after")
    def _a_function_tool(self) -> OpenAIFunctionToolSchema:
        if self.type != "function":
            raise ValueError(f'type must be "function" (the only OpenAI tool type here), got {self.type!r}')
        return self


class OpenAIFunctionParsedSchema(BaseModel):
    """A call as parsed from the model's text: the arguments are still JSON text."""

    name: str
    arguments: str


class OpenAIFunctionCallSchema(BaseModel):
    """A call with its arguments decoded into a dict."""

    name: str
    arguments: dict[str, Any]

    @staticmethod
    def from_openai_function_parsed_schema(
        parsed_schema: OpenAIFunctionParsedSchema,
    ) -> tuple[OpenAIFunctionCallSchema, bool]:
        """Decode the arguments; ``(call, True)`` with empty arguments when they are not a JSON object (verl's
        contract: the caller decides what a decode error means)."""
        try:
            arguments = json.loads(parsed_schema.arguments)
        except json.JSONDecodeError:
            return OpenAIFunctionCallSchema(name=parsed_schema.name, arguments={}), True
        if not isinstance(arguments, dict):
            return OpenAIFunctionCallSchema(name=parsed_schema.name, arguments={}), True
        return OpenAIFunctionCallSchema(name=parsed_schema.name, arguments=arguments), False


class OpenAIFunctionToolCall(BaseModel):
    """A call in an assistant message's ``tool_calls`` list (OpenAI chat format)."""

    id: str
    type: Literal["function"] = "function"
    function: OpenAIFunctionCallSchema


class ToolResponse(BaseModel):
    """What a tool answers: text for the ``tool`` message the model reads next, and optionally images or videos
    (lists, for multimodal models; text-only models here use ``text``)."""

    text: str | None = None
    image: list[Any] | None = None
    video: list[Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _media_are_lists(cls, values: Any) -> Any:
        if isinstance(values, dict):
            for key in ("image", "video"):
                if values.get(key) is not None and not isinstance(values[key], list):
                    raise ValueError(
                        f"ToolResponse.{key} must be a list, got {type(values[key]).__name__}: "
                        f"wrap a single {key} as [{key}]"
                    )
        return values

    def is_empty(self) -> bool:
        return not self.text and not self.image and not self.video

    def is_text_only(self) -> bool:
        return bool(self.text) and not self.image and not self.video
