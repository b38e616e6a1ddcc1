"""Code data for code RL: converters from the common public formats to verl's parquet rows (``code_formats``)."""

from verl.utils.data.code_formats import (
    assert_cases,
    code_rl_row,
    from_apps,
    from_humaneval,
    from_leetcode,
    from_mbpp,
)

__all__ = ["assert_cases", "code_rl_row", "from_apps", "from_humaneval", "from_leetcode", "from_mbpp"]
