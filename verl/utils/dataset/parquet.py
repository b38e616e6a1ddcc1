"""Reading verl-format parquet files into rows, with errors that name the file and the fix."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class Row:
    """One example plus where it came from, so an error can name the file and row."""

    data: dict[str, Any]
    file: str
    index: int

    @property
    def where(self) -> str:
        return f"{self.file}, row {self.index}"


def as_file_list(files: str | Sequence[str]) -> list[str]:
    if isinstance(files, str):
        return [files]
    if files is None:
        raise ValueError("no data files given: set data.train_files / data.val_files to parquet paths")
    return [str(f) for f in files]


def read_parquet_rows(files: str | Sequence[str], required_columns: Sequence[str] = ()) -> list[Row]:
    """Read one or more parquet files (``builtin://`` task specs are generated first) into :class:`Row` objects."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from verl.data.tasks import resolve_data_files

    rows: list[Row] = []
    for spec in as_file_list(files):
        path = os.path.expanduser(resolve_data_files(spec))
        if not os.path.exists(path):
            several = " For several files write a list: [a.parquet,b.parquet]." if "," in path else ""
            raise FileNotFoundError(
                f"data file {path!r} does not exist. Write one with `python -m verl.data.tasks arithmetic "
                f"--out-dir DIR`, or use a built-in spec such as builtin://arithmetic/train.{several}"
            )
        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as e:
            raise ValueError(
                f"data file {path!r} is not a readable parquet file ({e}). verl reads parquet with the columns "
                "data_source, prompt, ability, reward_model, extra_info; convert JSON/CSV with pandas.DataFrame.to_parquet."
            ) from None
        missing = [c.split(".")[0] for c in required_columns if c.split(".")[0] not in table.column_names]
        if missing:
            raise KeyError(
                f"data file {path!r} has no column {missing[0]!r} (columns: {table.column_names}). "
                f"Rename the column in the file, or point the config at the right one (e.g. data.prompt_key=...)."
            )
        rows.extend(Row(d, path, i) for i, d in enumerate(table.to_pylist()))
    return rows


def get_nested(row: Row, key: str) -> Any:
    """``get_nested(row, "extra_info.answer")``; a missing part raises KeyError naming the file, row and key."""
    value: Any = row.data
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value or value[part] is None:
            raise KeyError(
                f"{row.where}: no value at key {key!r} (missing {part!r}). Fix the row or the *_key setting."
            )
        value = value[part]
    return value


def prompt_to_messages(prompt: Any, row: Row) -> list[dict[str, str]]:
    """A prompt cell as a chat message list: a list of {role, content} dicts, or a plain string (one user turn)."""
    if isinstance(prompt, str):
        decoded = _json_messages(prompt)  # a message list stored as JSON text (a CSV/JSON round trip)
        return prompt_to_messages(decoded, row) if decoded is not None else [{"role": "user", "content": prompt}]
    if isinstance(prompt, (list, tuple)) and prompt:
        for m in prompt:
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
                raise ValueError(
                    f"{row.where}: malformed prompt {prompt!r}: expected a list of "
                    "{'role': str, 'content': str} messages, or a string."
                )
        return [{"role": m["role"], "content": m["content"]} for m in prompt]
    raise ValueError(f"{row.where}: malformed prompt {prompt!r}: expected a non-empty message list or a string.")


def _json_messages(text: str) -> list | None:
    """``text`` parsed as a JSON list of {role, content} messages, or None when it is not one."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]") and '"role"' in stripped):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m for m in value):
        return value
    return None


def render_prompt(tokenizer, messages: list[dict[str, str]], where: str | None = None) -> str:
    """The prompt text the model sees: the chat template with the generation prompt, or the raw text if none.
    ``where`` (file and row) names the row when the template rejects the messages."""
    if getattr(tokenizer, "chat_template", None):
        try:
            return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        except Exception as e:  # jinja2's TemplateError (e.g. "System role not supported") names no row
            raise ValueError(
                f"{where or 'a prompt'}: the tokenizer's chat template rejected the messages "
                f"{[m.get('role') for m in messages]}: {type(e).__name__}: {e}"
            ) from e
    return "\n".join(m["content"] for m in messages)
