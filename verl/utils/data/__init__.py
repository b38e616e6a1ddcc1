"""Code data for code RL: converters from the common public formats to verl's rows (``code_formats``) and the
guide's ``CodeFeedbackDataset`` (load, clean, save parquet)."""

from verl.utils.data.code_feedback import CodeFeedbackDataset, detect_format
from verl.utils.data.code_formats import (
    assert_cases,
    code_rl_row,
    from_apps,
    from_humaneval,
    from_leetcode,
    from_mbpp,
)

__all__ = [
    "CodeFeedbackDataset",
    "assert_cases",
    "code_rl_row",
    "from_apps",
    "from_humaneval",
    "from_leetcode",
    "from_mbpp",
    "detect_format",
]
