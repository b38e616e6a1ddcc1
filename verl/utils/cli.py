"""Entry-point wrapper: a user's input error ends the program with one clear line, not a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

USER_ERRORS: tuple[type[BaseException], ...] = (FileNotFoundError, KeyError, ValueError)


def run_cli(main: Callable[[], Any], extra_errors: tuple[type[BaseException], ...] = ()) -> None:
    """Run ``main()``; bad input (a bad key, value, file or row: ConfigError is a ValueError) exits with ``error: ...``."""
    try:
        main()
    except USER_ERRORS + extra_errors as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e  # KeyError's str() adds quotes
        sys.exit(f"error: {message}")
