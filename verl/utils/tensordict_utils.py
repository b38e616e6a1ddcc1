"""verl's import path for its TensorDict batch helpers (``from verl.utils import tensordict_utils as tu``).

They live in `verl.protocol_tensordict`, beside `verl.protocol.DataProto`, whose ``to_tensordict`` and
``DataProtoFuture.get`` use them: the protocol sits below ``verl.utils`` (docs/architecture.md).
"""

from verl.protocol_tensordict import *  # noqa: F403
from verl.protocol_tensordict import __all__, maybe_fix_3d_position_ids  # noqa: F401 (verl's tu names this too)
