"""Skip generation when debugging the rest of a step: the first run dumps one generated batch to disk, later runs
(and later steps) load it instead of generating (verl's ``RolloutSkip``).

    skip = RolloutSkip(config, actor_rollout_wg)
    skip.wrap_generate_sequences()   # actor_rollout_wg.generate_sequences now loads the dump when there is one

Every step then trains on the same batch: this is for profiling and debugging the stages after generation, never
for a real run. The dump is ``<actor_rollout_ref.rollout.skip_dump_dir>/<experiment>_<project>_GBS<g>_N<n>.pkl``
(``g``: ``data.train_batch_size``): a different batch size or ``rollout.n`` gets its own file. ``config`` is the
job's typed config (``load_config("ppo_trainer")``), read as attributes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl.protocol import DataProto

__all__ = ["DataProto", "RolloutSkip"]


class RolloutSkip:
    """Loads a dumped generation batch in place of generating one (module docstring)."""

    def __init__(self, config: Any, rollout_wg: Any):
        rollout, data, trainer = config.actor_rollout_ref.rollout, config.data, config.trainer
        self.n = int(rollout.n)
        self.gbs = int(data.train_batch_size)
        self.exp_name, self.project_name = trainer.experiment_name, trainer.project_name
        self.dumped_dir = Path(rollout.skip_dump_dir)
        self.dumped_dir.mkdir(parents=True, exist_ok=True)
        self._rollout_wg = rollout_wg
        print(f"[RolloutSkip] generated batches are dumped to and loaded from {self.dumped_dir.absolute()}")

    @property
    def curr_path_dump(self) -> Path:
        name = f"{self.exp_name}_{self.project_name}_GBS{self.gbs}_N{self.n}.pkl"
        return self.dumped_dir.joinpath(name).absolute()

    def wrap_generate_sequences(self) -> None:
        """Replace the worker group's ``generate_sequences`` with one that loads the dump, or generates and dumps
        when there is none yet."""
        generate = self._rollout_wg.generate_sequences

        def generate_or_load(batch: DataProto, **kwargs: Any) -> DataProto:
            out = self.try_load()
            if out is None:
                out = generate(batch, **kwargs)
                self.dump(out)
            return out

        self._rollout_wg.generate_sequences = generate_or_load
        print("[RolloutSkip] Successfully patched generate_sequences: it loads the dumped batch when there is one")

    def try_load(self) -> DataProto | None:
        """The dumped batch, or None when there is none (or it cannot be read: it is then generated again)."""
        path = self.curr_path_dump
        if not path.exists():
            print(f"[RolloutSkip] no dump at {path} yet: this step generates and dumps it")
            return None
        try:
            batch = DataProto.load_from_disk(str(path))
        except Exception as e:  # a dump from another version or a truncated file: generate a fresh one
            print(f"[RolloutSkip] could not load {path} ({type(e).__name__}: {e}); generating instead")
            return None
        print(f"[RolloutSkip] Successfully load pre-generated data from {path}")
        return batch

    def dump(self, outputs: DataProto) -> None:
        """Write ``outputs`` as the dump (a failure to write is reported, never fatal: the run goes on)."""
        path = self.curr_path_dump
        try:
            outputs.save_to_disk(str(path))
        except Exception as e:
            print(f"[RolloutSkip] could not dump the batch to {path}: {type(e).__name__}: {e}")
            return
        print(f"[RolloutSkip] Successfully dump data in {path}")
