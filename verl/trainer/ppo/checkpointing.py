"""The run's checkpoints: ``<trainer.default_local_dir>/global_step_N/`` with each role's state and the controller's.

    global_step_N/actor/     the actor worker's checkpoint (dcp/ shards, huggingface/, extra_state.pt)
    global_step_N/critic/    the critic's, when the run has one
    global_step_N/data.pt    the controller's state: step, data order, RNGs, the adaptive KL coefficient
    latest_checkpointed_iteration.txt   the newest complete checkpoint's step (verl's pointer file)

A checkpoint is written under ``global_step_N.tmp`` and renamed when complete, so a crash never leaves a half-written
one; then (in the trainer: once the step's metrics are logged, see `RunCheckpoints.commit`) the pointer is replaced
the same way and old checkpoints are pruned (``trainer.max_*_ckpt_to_keep``). A full disk ends the run with one
`DiskFullError`: the half-written directory removed, the previous checkpoint and the pointer untouched.
``trainer.resume_mode`` picks what a new run starts from: ``auto`` (the pointer's checkpoint, if any), ``disable``
or ``resume_path`` (``trainer.resume_from_path``).
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import time
from typing import Any

import numpy as np
import torch

from verl.utils.checkpoint.checkpoint_manager import should_save_ckpt_esi
from verl.utils.disk import DiskFullError, cause, free_bytes, human_bytes, is_disk_full, tree_bytes
from verl.utils.failpoints import failpoint

logger = logging.getLogger(__name__)

LATEST = "latest_checkpointed_iteration.txt"


class RunCheckpoints:
    """Saves, finds and prunes the checkpoints of one run directory (``trainer`` is the config's trainer section)."""

    def __init__(self, trainer: Any):
        self.trainer = trainer
        self._warned_newer = False
        self._last_due_check: float | None = None
        self._pending: int | None = None  # the step whose checkpoint `save` wrote and `commit` has not yet made latest
        self.max_steps_duration = 0.0  # the longest interval between two steps' save checks, in seconds

    def due(self, step: int, total_steps: int) -> bool:
        """Whether step ``step`` saves: with ``save_freq > 0`` every ``save_freq`` steps, at the last step, and when
        the machine's reservation is about to end (`should_save_ckpt_esi`, with the longest step so far measured
        between two calls, one per step)."""
        now = time.monotonic()
        if self._last_due_check is not None:
            self.max_steps_duration = max(self.max_steps_duration, now - self._last_due_check)
        self._last_due_check = now
        save_freq = self.trainer.save_freq
        if save_freq <= 0:
            return False
        if step == total_steps or step % save_freq == 0:
            return True
        if should_save_ckpt_esi(self.max_steps_duration, redundant_time=self.trainer.esi_redundant_time):
            logger.warning("the capacity reservation ends soon: saving a checkpoint at step %d", step)
            return True
        return False

    @property
    def root(self) -> str:
        return os.path.abspath(os.path.expanduser(self.trainer.default_local_dir))

    def save(self, step: int, roles: dict[str, Any], controller_state: dict[str, Any], commit: bool = True) -> str:
        """``global_step_<step>/{<role>/, data.pt}``, written to a temp dir and renamed: all or nothing. ``roles``
        maps a sub-directory name to a worker group with ``save_checkpoint(path)``. With ``commit=False`` the
        pointer file is left to `commit`: the trainer commits a step's checkpoint once the step's metrics are
        logged, so that a run resumed from it never lacks that step's record. A write that fails removes the
        half-written directory; on a full disk it raises one `DiskFullError` saying what was kept and what to do."""
        final = os.path.join(self.root, f"global_step_{step}")
        tmp = final + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            for name, group in roles.items():
                group.save_checkpoint(os.path.join(tmp, name))
            failpoint("checkpoint.write")  # every role's files written, the checkpoint not complete: the worst spot
            torch.save(controller_state, os.path.join(tmp, "data.pt"))
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except BaseException as e:  # DCP's CheckpointException is a BaseException
            full = is_disk_full(e, self.root)
            shutil.rmtree(tmp, ignore_errors=True)  # useless half-written, and on a full disk it holds the space
            if full:
                raise self._disk_full(e, f"writing checkpoint global_step_{step}", f"global_step_{step}.tmp") from e
            raise
        failpoint("checkpoint.saved")
        self._pending = step
        if commit:
            self.commit(step)
        return final

    def commit(self, step: int) -> None:
        """Make the checkpoint `save` wrote for ``step`` the one a resumed run starts from (the pointer file), then
        prune old ones; nothing when ``step`` has no checkpoint waiting (the trainer calls it after every log)."""
        if self._pending != step:
            return
        latest = os.path.join(self.root, LATEST)
        try:
            with open(latest + ".tmp", "w") as f:
                f.write(str(step))
            os.replace(latest + ".tmp", latest)
        except OSError as e:
            if os.path.exists(latest + ".tmp"):
                os.remove(latest + ".tmp")
            if is_disk_full(e, self.root):
                raise self._disk_full(e, f"committing checkpoint global_step_{step} ({LATEST})", LATEST + ".tmp") from e
            raise
        self._pending = None
        self.prune(step)

    def _disk_full(self, error: BaseException, doing: str, removed: str) -> DiskFullError:
        """The one error a full disk during a save ends the run with: where, how much, what was kept, what to do."""
        previous = self._committed_step()
        size = tree_bytes(os.path.join(self.root, f"global_step_{previous}")) if previous is not None else 0
        need = f"; a checkpoint of this run takes {human_bytes(size)}" if size else ""
        kept = (
            f"The previous checkpoint global_step_{previous} is intact and {LATEST} names it; metrics.jsonl keeps "
            f"the metrics logged so far. Once there is room, rerunning the same command resumes from step {previous}."
            if previous is not None
            else "No earlier checkpoint was committed: rerunning the same command starts over."
        )
        return DiskFullError(
            f"no space left on the device of trainer.default_local_dir={self.root} {doing} ({cause(error)}): "
            f"{human_bytes(free_bytes(self.root))} free after removing {removed}{need}. {kept} To go on, free space "
            "on that file system (old global_step_* directories you do not need can go; "
            "trainer.max_actor_ckpt_to_keep=K keeps only K, and a save needs room for one checkpoint more than it "
            "keeps) or move the run directory to a disk with room and set trainer.default_local_dir to it."
        )

    def _committed_step(self) -> int | None:
        latest = os.path.join(self.root, LATEST)
        try:
            return int(open(latest).read().strip())
        except (OSError, ValueError):
            return None

    def prune(self, step: int) -> None:
        """Keep the checkpoint of ``step`` (just written) and the newest ``keep - 1`` before it (``keep`` = the smaller
        of the actor/critic limits that are set). Higher-numbered checkpoints left by an abandoned run (one restarted
        with ``resume_mode=disable``, or resumed from an older path) are not this run's history: they are left alone,
        with a warning, and never displace the checkpoint just saved."""
        t = self.trainer
        limits = [k for k in (t.max_actor_ckpt_to_keep, t.max_critic_ckpt_to_keep) if k is not None and k > 0]
        if not limits:
            return
        keep = min(limits)
        steps = sorted(
            int(d.split("_")[-1])
            for d in os.listdir(self.root)
            if d.startswith("global_step_") and d.split("_")[-1].isdigit()
        )
        older = [s for s in steps if s < step]
        for old in older[: max(len(older) - (keep - 1), 0)]:
            shutil.rmtree(os.path.join(self.root, f"global_step_{old}"), ignore_errors=True)
        newer = [s for s in steps if s > step]
        if newer and not self._warned_newer:
            self._warned_newer = True
            logger.warning(
                "%s holds checkpoints of later steps %s from an earlier run; they are not pruned and not resumed "
                "from (latest_checkpointed_iteration.txt names step %d). Delete them if they are not needed.",
                self.root,
                newer,
                step,
            )

    def find_resume_dir(self) -> str | None:
        """The checkpoint a new run resumes from under ``trainer.resume_mode``, or None to start over."""
        t = self.trainer
        if t.resume_mode == "disable":
            return None
        if t.resume_mode == "resume_path":
            return self._checked_resume_path(t.resume_from_path)
        if t.resume_mode != "auto":
            raise ValueError(f"trainer.resume_mode={t.resume_mode!r}: use auto, disable or resume_path")
        latest = os.path.join(self.root, LATEST)
        if not os.path.isfile(latest):
            return None
        step = open(latest).read().strip()
        path = os.path.join(self.root, f"global_step_{step}")
        if not os.path.isdir(path):  # starting over silently would overwrite the run's history
            raise FileNotFoundError(
                f"{latest} names step {step!r} but {path} does not exist. Resume from another checkpoint with "
                "trainer.resume_mode=resume_path trainer.resume_from_path=<dir>, or start over with "
                "trainer.resume_mode=disable."
            )
        return path

    @staticmethod
    def _checked_resume_path(given: str | None) -> str:
        if not given or not os.path.isdir(os.path.expanduser(given)):
            raise FileNotFoundError(f"trainer.resume_from_path={given!r} is not a checkpoint directory")
        path = os.path.abspath(os.path.expanduser(given))
        if not os.path.isfile(os.path.join(path, "data.pt")):
            steps = sorted(d for d in os.listdir(path) if d.startswith("global_step_") and "." not in d)
            hint = (
                f"it looks like a run directory: give one of its checkpoints ({path}/{steps[-1]}), or "
                f"trainer.resume_mode=auto trainer.default_local_dir={path}"
                if steps
                else "a checkpoint directory is global_step_N/ holding data.pt and actor/"
            )
            raise FileNotFoundError(f"trainer.resume_from_path={given!r} is not a checkpoint: {hint}")
        return path

    def fallbacks(self, path: str) -> list[str]:
        """The checkpoints to try, newest first, when ``path`` (the latest, ``resume_mode=auto``) cannot be read:
        the run's earlier ``global_step_N`` directories. A given ``resume_from_path`` has none: it was asked for."""
        if self.trainer.resume_mode != "auto":
            return []
        step = int(os.path.basename(path).split("_")[-1])
        steps = sorted(
            (int(d.split("_")[-1]) for d in os.listdir(self.root) if d.startswith("global_step_") and d[12:].isdigit()),
            reverse=True,
        )
        return [os.path.join(self.root, f"global_step_{s}") for s in steps if s < step]

    def load_first_readable(self, path: str, roles: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """`load` ``path``, or, when it is truncated or corrupt (any error reading it), the newest earlier checkpoint
        that loads; each one passed over is reported in one line with its error. Every role's whole state is loaded
        again from the one used, so a checkpoint that failed half-way leaves nothing behind."""
        errors = []
        for candidate in [path, *self.fallbacks(path)]:
            try:
                return candidate, self.load(candidate, roles)
            except BaseException as e:  # DCP's CheckpointException is a BaseException: any unreadable file counts
                if isinstance(e, (KeyboardInterrupt, SystemExit)):
                    raise
                lines = [line.strip() for line in str(e).splitlines() if line.strip()] or [""]
                errors.append(
                    f"{candidate}: {type(e).__name__}: {lines[-1][:300]}"
                )  # a traceback's last line: the cause
                print(f"checkpoint {candidate} cannot be read ({errors[-1]}); trying the previous one")
        raise RuntimeError(
            "no checkpoint of this run can be read:\n  " + "\n  ".join(errors) + "\nStart over with "
            "trainer.resume_mode=disable, or give another with trainer.resume_mode=resume_path trainer.resume_from_path=<dir>"
        )

    def load(self, path: str, roles: dict[str, Any]) -> dict[str, Any]:
        """Load each role's state from ``path/<role>``; returns the controller's state (``data.pt``)."""
        for name, group in roles.items():
            group.load_checkpoint(os.path.join(path, name))
        return torch.load(os.path.join(path, "data.pt"), weights_only=False)

    def resume_hint(self) -> str:
        """Where a stopped run would resume from, as a sentence for error messages."""
        latest = os.path.join(self.root, LATEST)
        if os.path.isfile(latest):
            step = open(latest).read().strip()
            return (
                f"The last checkpoint is global_step_{step} in {self.root}: run the same command again "
                "to resume from it (trainer.resume_mode=auto)"
            )
        return "No checkpoint was saved yet (trainer.save_freq): running the same command again starts over"


def controller_state(step: int, prompt_loader: Any, kl_ctrl: Any = None, watch: Any = None) -> dict[str, Any]:
    """What the controller needs to go on exactly where it stopped: the step, the data order's position, every RNG,
    the adaptive KL coefficient and the collapse watch's bests and learning-rate scale."""
    return {
        "global_steps": step,
        "dataloader": prompt_loader.state_dict(),
        "python_rng": random.getstate(),
        "numpy_rng": np.random.get_state(),
        "torch_rng": torch.get_rng_state(),
        "kl_ctrl": vars(kl_ctrl) if kl_ctrl is not None else None,
        "collapse_watch": watch.state_dict() if watch is not None else None,
    }


def restore_controller_state(state: dict[str, Any], prompt_loader: Any, kl_ctrl: Any = None, watch: Any = None) -> int:
    """Put `controller_state` back (data order, RNGs, KL coefficient, collapse watch); returns the step."""
    prompt_loader.load_state_dict(state["dataloader"])
    random.setstate(state["python_rng"])
    np.random.set_state(state["numpy_rng"])
    torch.set_rng_state(state["torch_rng"])
    if kl_ctrl is not None and state.get("kl_ctrl"):
        vars(kl_ctrl).update(state["kl_ctrl"])
    if watch is not None and state.get("collapse_watch"):  # checkpoints from before it was saved: a fresh watch
        watch.load_state_dict(state["collapse_watch"])
    return int(state["global_steps"])
