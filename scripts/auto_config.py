"""Plan a run's memory and parallel configuration before renting the GPUs:

    python scripts/auto_config.py --model_size 7b --gpu_type a100 --num_gpus 8 --task code-generation
    python scripts/auto_config.py --model_path /models/Qwen2.5-7B-Instruct --gpu_type h100 --num_gpus 16

A thin wrapper of :mod:`verl.planner` (``python -m verl.planner``, ``verl auto-config``) that also runs from a
checkout where verl is not installed; see docs/auto_config.md.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from verl.planner.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="python scripts/auto_config.py"))
