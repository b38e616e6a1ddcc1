#!/usr/bin/env bash
""":"
# Both a shell script and a Python file, so the guide's `python scripts/generate_trainer_config.sh --task ...` and
# `bash scripts/generate_trainer_config.sh --task ...` both work: bash runs the next line, Python skips this string.
exec python3 "$(dirname "$0")/auto_config.py" "$@"
":"""
# Python: scripts/auto_config.py with the same arguments (its defaults: a 7B model on 8 x A100 80 GB); the planned
# overrides for main_ppo are written under outputs/auto_config/ (docs/auto_config.md).
import os
import runpy
import sys

script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "auto_config.py")
sys.argv = [script, *sys.argv[1:]]
runpy.run_path(script, run_name="__main__")
