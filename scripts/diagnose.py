"""Is this machine ready for verl? ``python scripts/diagnose.py --check-all`` (= ``verl diagnose --check-all``).

A thin wrapper of :mod:`verl.diagnose` that also runs from a checkout where verl is not installed; see
docs/diagnose.md for the checks and flags.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from verl.diagnose import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="python scripts/diagnose.py"))
