"""The pieces the fault suite stands on: a failpoint kills its process (SIGKILL) on the named pass and nowhere else;
the metrics file keeps whole records only, on a kill mid-write and on a full disk; a resumed run drops the records of
the steps it computes again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from verl.utils.disk import DiskFullError
from verl.utils.failpoints import parse
from verl.utils.tracking import FileLogger, rewind_metrics_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
from verl.utils.failpoints import failpoint
for i in range(1, 4):
    failpoint("validation")
    print("passed", i, flush=True)
"""


def run_script(env: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, **env}
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60)


def test_a_failpoint_kills_on_its_pass_and_traces_what_it_passed(tmp_path):
    trace = tmp_path / "trace"
    proc = run_script({"VERL_FAILPOINTS": "validation@2", "VERL_FAILPOINTS_TRACE": str(trace)})
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout.split("\n")[:-1] == ["passed 1"]
    assert trace.read_text().split() == ["validation", "validation"]
    assert run_script({"VERL_FAILPOINTS": "actor.update@1"}).returncode == 0  # another point: no effect
    assert run_script({}).stdout.count("passed") == 3


def test_an_unknown_failpoint_is_an_error():
    assert parse("checkpoint.write@3,validation") == {"checkpoint.write": 3, "validation": 1}
    with pytest.raises(ValueError, match="unknown failpoint 'checkpoint.wirte'"):
        parse("checkpoint.wirte@1")


def test_a_resumed_run_keeps_the_records_up_to_its_checkpoint_and_drops_a_half_written_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"step": s, "x": s}) + "\n" for s in (0, 1, 2, 3)]
    path.write_text("".join(lines) + '{"step": 4, "x"')  # killed while writing step 4
    assert rewind_metrics_file(str(path), keep_through=2) == (1, 1)
    assert path.read_text() == "".join(lines[:3])
    assert rewind_metrics_file(str(path), keep_through=-1) == (3, 0)  # no checkpoint: everything is logged again
    assert path.read_text() == ""
    # nothing written is lost: what was taken out is in metrics.replaced.jsonl, in order
    replaced = (tmp_path / "metrics.replaced.jsonl").read_text()
    assert replaced == lines[3] + '{"step": 4, "x"\n' + "".join(lines[:3])


def test_a_metrics_record_that_does_not_fit_is_cut_back_and_named(tmpfs):
    disk = tmpfs(0.1)  # 100 KiB
    logger = FileLogger(os.path.join(disk, "metrics.jsonl"))
    logger.log({"x": 1.0}, step=1)
    with open(os.path.join(disk, "filler"), "wb") as f:
        try:
            f.write(b"\0" * (1 << 20))
        except OSError:
            pass
    with pytest.raises(DiskFullError, match="no space left on the device of .*metrics.jsonl writing step 2"):
        logger.log({"x": "y" * 200_000}, step=2)  # more than any page left: a short write, then ENOSPC
    logger.close()
    with open(os.path.join(disk, "metrics.jsonl")) as f:
        assert [json.loads(line)["step"] for line in f] == [1]
