"""verl's import path for the cross-key checks of a loaded ``ppo_trainer`` config: they live in
`verl.utils.ppo_config`, below tune and the trainer, which both run them."""

from verl.utils.ppo_config import check_bypass_mode, check_ppo_config, check_rollout_correction

__all__ = ["check_bypass_mode", "check_ppo_config", "check_rollout_correction"]
