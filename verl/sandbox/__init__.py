"""Running model-written code safely: the local sandbox (bubblewrap + resource limits), failing closed where
bubblewrap cannot start. See docs/security.md and docs/code_rl.md."""

from verl.sandbox.local import (
    ISOLATION_ENV,
    ISOLATIONS,
    SandboxConfig,
    SandboxResult,
    SandboxUnavailable,
    bwrap_status,
    default_isolation,
    resolve_isolation,
    run_code,
)

__all__ = [
    "ISOLATIONS",
    "ISOLATION_ENV",
    "SandboxConfig",
    "SandboxResult",
    "SandboxUnavailable",
    "bwrap_status",
    "default_isolation",
    "resolve_isolation",
    "run_code",
]
