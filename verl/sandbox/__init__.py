"""Running model-written code safely: the local sandbox (bubblewrap + resource limits). See docs/code_rl.md."""

from verl.sandbox.local import SandboxConfig, SandboxResult, SandboxUnavailable, bwrap_status, run_code

__all__ = ["SandboxConfig", "SandboxResult", "SandboxUnavailable", "bwrap_status", "run_code"]
