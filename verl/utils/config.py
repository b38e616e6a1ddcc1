"""verl's import path for the config API (``from verl.utils.config import omega_conf_to_dataclass``): loading and
typing a job's config (`verl.utils.config_loader`: ``load_config`` returns the job's schema dataclass), reading and
writing a loaded one (`verl.utils.config_tree`: ``to_yaml``, ``select``) and the PPO config's dict view
(`verl.utils.config_dict`), which is built on the loader, so they live in their own modules and meet here.
"""

from verl.utils.config_dict import ConfigDict, dict_key, get_ppo_default_config, ppo_dict_to_overrides
from verl.utils.config_loader import (
    JOBS,
    ConfigError,
    UnknownConfigKeyError,
    as_section,
    choose_recipe,
    default_config,
    job_schema,
    load_config,
    load_yaml,
    merge_config,
    omega_conf_to_dataclass,
    parse_overrides,
    recipe_names,
    recipe_path,
    replace_keys,
    schema_keys,
    select,
    to_container,
    to_yaml,
)

__all__ = [
    "JOBS",
    "ConfigDict",
    "ConfigError",
    "UnknownConfigKeyError",
    "as_section",
    "choose_recipe",
    "default_config",
    "dict_key",
    "get_ppo_default_config",
    "job_schema",
    "load_config",
    "load_yaml",
    "merge_config",
    "omega_conf_to_dataclass",
    "parse_overrides",
    "ppo_dict_to_overrides",
    "recipe_names",
    "recipe_path",
    "replace_keys",
    "schema_keys",
    "select",
    "to_container",
    "to_yaml",
]
