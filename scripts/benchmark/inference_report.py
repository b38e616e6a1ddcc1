"""The inference benchmark's report: one JSON file and one Markdown table (also printed)."""

from __future__ import annotations

import json
import os
from typing import Any

from inference_engine_run import DEFINITIONS

JSON_NAME = "inference_benchmark.json"
MARKDOWN_NAME = "inference_benchmark.md"
# (header, row key, decimals)
COLUMNS = (
    ("start s", "start_s", 1),
    ("batch s", "batch_s", 2),
    ("generated tokens", "generated_tokens", 0),
    ("tokens/s", "tokens_per_s", 1),
    ("TTFT s", "ttft_s", 3),
    ("1-token batch s", "first_token_batch_s", 3),
    ("latency p50 s", "latency_p50_s", 2),
    ("latency p95 s", "latency_p95_s", 2),
    ("peak RSS MB", "peak_rss_mb", 0),
    ("mean response tokens", "mean_response_tokens", 1),
)


def _cell(value: Any, decimals: int) -> str:
    if value is None:
        return "-"
    if isinstance(value, (int, float)):
        return f"{value:,.{decimals}f}" if decimals else f"{round(value):d}"
    return str(value)


def markdown(result: dict[str, Any]) -> str:
    setup, rows = result["setup"], result["rows"]
    model = setup["model"]
    sampling = setup["sampling"]
    prompt_tokens = setup["prompt_tokens"]
    # the one-token batch runs only where asked for or needed: no column of dashes otherwise
    columns = [c for c in COLUMNS if c[1] != "first_token_batch_s" or any(r.get(c[1]) is not None for r in rows)]
    lines = [
        f"### Inference benchmark: {model['path']}",
        "",
        f"`{setup['command']}`",
        "",
        f"({setup['date']}; {model['model_type']}, {model['parameters'] / 1e6:.1f}M parameters: hidden "
        f"{model['hidden_size']}, {model['num_hidden_layers']} layers, {model['num_attention_heads']} heads, "
        f"{model['num_key_value_heads']} KV heads, vocabulary {model['vocab_size']}; {setup['num_prompts']} prompts "
        f"from {setup['prompts']} ({prompt_tokens['min']}-{prompt_tokens['max']} tokens, mean "
        f"{prompt_tokens['mean']:.1f}) x at most {setup['max_new_tokens']} new tokens, temperature "
        f"{sampling['temperature']:g}, top_p {sampling['top_p']:g}, seed {sampling['seed']}; {setup['dtype']} on "
        f"{setup['device']}, {setup['threads']} threads per engine; median of {setup['repeats']} timed batch(es))",
        "",
        "| engine | status | " + " | ".join(header for header, _, _ in columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for row in rows:
        name = row["engine"] + (f" {row['version']}" if row.get("version") else "")
        if row["status"] != "ok":
            status = f"{row['status']}: {row.get('reason', '')}".replace("|", "/")
            lines.append(f"| {name} | {status} |" + " |" * len(columns))
            continue
        cells = [_cell(row.get(key), decimals) for _, key, decimals in columns]
        status = "ok" if row.get("ttft_source") == "request clock" else f"ok (TTFT: {row.get('ttft_source')})"
        lines.append(f"| {name} | {status} | " + " | ".join(cells) + " |")
    lines += ["", "Definitions:", ""] + [f"- `{key}`: {text}" for key, text in result["definitions"].items()]
    return "\n".join(lines) + "\n"


def write_report(setup: dict[str, Any], rows: list[dict[str, Any]], output_dir: str) -> dict[str, Any]:
    """Write ``inference_benchmark.json`` and ``.md`` to ``output_dir``, print the table, return the result."""
    result = {"setup": setup, "definitions": DEFINITIONS, "rows": rows}
    with open(os.path.join(output_dir, JSON_NAME), "w") as f:
        json.dump(result, f, indent=1)
    text = markdown(result)
    with open(os.path.join(output_dir, MARKDOWN_NAME), "w") as f:
        f.write(text)
    print(text, flush=True)
    print(f"wrote {os.path.join(output_dir, JSON_NAME)} and {MARKDOWN_NAME}", flush=True)
    return result
