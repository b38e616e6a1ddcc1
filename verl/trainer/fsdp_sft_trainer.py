"""Public verl's SFT entry point, for ported scripts: ``torchrun --nproc_per_node=1 -m verl.trainer.fsdp_sft_trainer
data.train_files=... model.partial_pretrain=...`` runs this version's SFT job (`verl.trainer.main_sft`, one process;
docs/sft.md, "Porting a verl SFT script")."""

from verl.trainer.main_sft import main, run_sft
from verl.utils.cli import run_cli

__all__ = ["main", "run_sft"]

if __name__ == "__main__":
    run_cli(main)
