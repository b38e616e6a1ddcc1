"""``python -m verl.diagnose`` (= ``verl diagnose``)."""

import sys

from verl.diagnose import main

sys.exit(main())
