"""verl's import path for the data section's schema; it lives with the datasets that read it
(`verl.utils.dataset.data_config`)."""

from verl.utils.dataset.data_config import DataSamplerConfig, RLDataConfig

__all__ = ["DataSamplerConfig", "RLDataConfig"]
