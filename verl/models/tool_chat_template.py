"""The tool-aware chat template of the tiny models (``builtin://tiny-qwen2?tools=true``): Qwen2.5's layout, compacted.

What it renders (``apply_chat_template(messages, tools=[schema, ...])``)::

    <|im_start|>system
    <tools>calculator(expression)</tools><|im_end|><|im_start|>user
    What is 4821 * 37?<|im_end|><|im_start|>assistant
    <tool_call>{"name": "calculator", "arguments": {"expression": "4821*37"}}</tool_call><|im_end|><|im_start|>user
    <tool_response>178377</tool_response><|im_end|><|im_start|>assistant
    #### 178377<|im_end|>

How it differs from Qwen2.5's template, and why:

- **Tools are signatures**, ``name(param, ...)`` inside ``<tools>...</tools>`` in the system turn, not Qwen's
  paragraph of instructions plus each schema as JSON: a 2 MB model pays for every byte of context and cannot read
  instructions anyway. Descriptions are left out, so a reworded tool description does not change the prompt a
  checkpoint was trained on. A system message, when there is one, comes first in that turn.
- **Calls and responses without inner newlines**: ``<tool_call>{json}</tool_call>`` and
  ``<tool_response>text</tool_response>``. The call's JSON is Qwen's (``{"name": ..., "arguments": ...}``, the
  hermes format): arguments given as a JSON string are copied as they are, a dict goes through ``tojson``.
- **Nothing after** ``<|im_end|>``: the model's turn ends at its EOS token, so the model's own tokens followed by the
  rendering of the next messages are exactly the rendering of the whole conversation (Qwen writes ``<|im_end|>\\n``,
  a newline the model never generates, which token-in-token-out trajectories then lack).
- **One user turn per tool message** (Qwen groups consecutive tool messages into one user turn): every message ends
  its own turn, so the rendering of a conversation's first k messages is a prefix of the rendering of its first k+1
  (with ``add_generation_prompt`` too, when message k+1 is the assistant's). The agent loop appends the delta ids of
  new messages and multi-turn SFT masks turns by these deltas; both rely on this property.
"""

from __future__ import annotations

# Jinja, one line per construct and no whitespace between them: HF renders with trim_blocks, which would drop a
# newline written right after a tag, so every newline is an expression ({{ '\\n' }}). `tool['function']` is the OpenAI
# entry's function ({"type": "function", "function": {...}}); a bare function dict works too.
TOOL_CHAT_TEMPLATE = (
    "{% set has_system = messages and messages[0]['role'] == 'system' %}"
    "{% if tools or has_system %}"
    "<|im_start|>system{{ '\\n' }}"
    "{% if has_system %}{{ messages[0]['content'] }}{% if tools %}{{ '\\n' }}{% endif %}{% endif %}"
    "{% if tools %}"
    "<tools>"
    "{% for tool in tools %}"
    "{% set fn = tool['function'] if tool['function'] is defined else tool %}"
    "{% set params = fn['parameters'] if fn['parameters'] is defined and fn['parameters'] else {} %}"
    "{% set props = params['properties'] if params['properties'] is defined and params['properties'] else {} %}"
    "{% if not loop.first %} {% endif %}{{ fn['name'] }}({{ props.keys() | join(', ') }})"
    "{% endfor %}"
    "</tools>"
    "{% endif %}"
    "<|im_end|>"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' and loop.first %}"
    "{% elif message['role'] == 'tool' %}"
    "<|im_start|>user{{ '\\n' }}<tool_response>{{ message['content'] }}</tool_response><|im_end|>"
    "{% elif message['role'] == 'assistant' %}"
    "<|im_start|>assistant{{ '\\n' }}{{ message['content'] or '' }}"
    "{% if message['tool_calls'] is defined and message['tool_calls'] %}"
    "{% if message['content'] %}{{ '\\n' }}{% endif %}"
    "{% for call in message['tool_calls'] %}"
    "{% set fn = call['function'] if call['function'] is defined else call %}"
    '<tool_call>{"name": "{{ fn[\'name\'] }}", "arguments": '
    "{% if fn['arguments'] is string %}{{ fn['arguments'] }}{% else %}{{ fn['arguments'] | tojson }}{% endif %}"
    "}</tool_call>"
    "{% endfor %}"
    "{% endif %}"
    "<|im_end|>"
    "{% else %}"
    "<|im_start|>{{ message['role'] }}{{ '\\n' }}{{ message['content'] }}<|im_end|>"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{{ '\\n' }}{% endif %}"
)

# Qwen2.5 has these as added tokens of their own; one token each saves the tiny model ~12 positions per block.
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
