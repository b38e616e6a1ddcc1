"""The ``sandbox`` section: how model-written code that a job runs on this machine is isolated (code rewards scored
in the local sandbox, the ``code_interpreter`` tool). docs/security.md says what each choice stops."""

from __future__ import annotations

from dataclasses import dataclass

from verl.base_config import BaseConfig

__all__ = ["CodeSandboxConfig"]


@dataclass
class CodeSandboxConfig(BaseConfig):
    """The local code sandbox of a job (not a SandboxFusion service: ``reward_model.sandbox_fusion.url``)."""

    # bwrap: bubblewrap namespaces + resource limits, and the job stops at start where bubblewrap cannot run;
    # rlimit: resource limits only (the code can read this machine's files and reach its network);
    # null: $VERL_SANDBOX_ISOLATION, else bwrap
    isolation: str | None = None
