"""An OpenAI-compatible HTTP server over a rollout engine (``python -m verl.trainer.main_generation_server``).

The request path is the agent loop's: messages and tools through the model's chat template (`chat_prompt`), the
prompt ids to the rollout's per-request ``async generate``, the response through the hermes tool parser. So an agent
framework that speaks OpenAI's API talks to the same sampler, with the same rendering and tool-call format, that
rollouts use. Modules: `served_model` (what is served, and how it is loaded), `app` (routes), `chat` and
`completions` (each endpoint's request and response), `sampling` (OpenAI's sampling fields -> the rollout's),
`generation` (a request's choices), `tool_calls` (text -> OpenAI tool calls), `fields` and `errors` (checks and 4xx
answers). fastapi and uvicorn are imported only when the app is built (``pip install -e ".[serve]"``).
"""
