"""What the code scorers share (`prime_code`, the `sandbox_fusion` client, `code_eval`, `code_reward`): the program a
response holds and the test cases it is judged on. ``prime_code`` re-exports both, as verl has them there."""

from __future__ import annotations

import re
from typing import Any

_FENCE = re.compile(r"```(?:python|py|Python)?[ \t]*\n(.*?)```", re.S)


def extract_code(completion: str) -> str:
    """The last fenced code block of ``completion`` (```python ... ```), else the whole text."""
    blocks = _FENCE.findall(completion or "")
    return blocks[-1] if blocks else (completion or "")


def first_cases(cases: dict[str, Any], n: int) -> dict[str, Any]:
    """Parsed test cases cut to their first ``n``."""
    return {**cases, "inputs": cases["inputs"][:n], "outputs": cases["outputs"][:n]}
