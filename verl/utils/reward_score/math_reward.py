"""verl's name for the MATH scorer (``verl.utils.reward_score.math_reward``): the functions of
:mod:`verl.utils.reward_score.math`, where the rules are described."""

from __future__ import annotations

from verl.utils.reward_score import math as _math
from verl.utils.reward_score.math import compute_score, last_boxed_only_string, remove_boxed, strip_string

__all__ = ["compute_score", "fix_a_slash_b", "fix_fracs", "fix_sqrt", "is_equiv", "last_boxed_only_string"]
__all__ += ["remove_boxed", "strip_string"]

fix_fracs = _math._fix_fracs
fix_sqrt = _math._fix_sqrt
fix_a_slash_b = _math._fix_slash_fraction


def is_equiv(str1: str | None, str2: str | None, verbose: bool = False) -> bool:
    """Whether two answers agree after normalisation (verl's signature; ``verbose`` prints both normal forms)."""
    if verbose and str1 is not None and str2 is not None:
        print(strip_string(str1), strip_string(str2))
    return _math.is_equiv(str1, str2)
