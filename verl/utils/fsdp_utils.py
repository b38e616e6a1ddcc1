"""FSDP2 (``torch.distributed.fsdp.fully_shard``) for the role workers, and the checkpoint format every backend uses.

Sharding: each decoder layer (the classes an HF model lists in ``_no_split_modules``) becomes one FSDP unit, then
the root (embeddings, final norm, head). Parameters live as ``DTensor`` shards, one per rank; forward and backward
all-gather a unit's weights just in time and reduce-scatter its gradients (averaged over ranks).

Checkpoint of one role (``global_step_N/actor/``), identical for the local and the Ray backend:

- ``dcp/``: model and optimizer state through ``torch.distributed.checkpoint`` (each rank writes its own shards;
  loading reshards, so a checkpoint loads on the same or a different number of workers, or in one process);
- ``huggingface/``: the full weights as a plain HF directory (``from_pretrained`` loads it);
- ``extra_state.pt``: LR schedule and sampler state (the same on every rank).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

_DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}


def _dtype(name: str | None, default: torch.dtype) -> torch.dtype:
    if name is None:
        return default
    if name not in _DTYPES:
        raise ValueError(f"fsdp_config.mixed_precision: unknown dtype {name!r}; use one of {sorted(_DTYPES)}")
    return _DTYPES[name]


def apply_fsdp2(module: torch.nn.Module, fsdp_config: Any, device: torch.device) -> torch.nn.Module:
    """Shard ``module`` in place over all ranks of the default process group; returns it (now an FSDPModule).

    ``fsdp_config`` (a ``verl.workers.config.FSDPEngineConfig``): ``mixed_precision.{param_dtype, reduce_dtype}`` (compute and gradient-reduction dtypes;
    null: bf16 compute on CUDA, fp32 on CPU; reduction fp32), ``param_offload`` / ``optimizer_offload`` (keep shards,
    gradients and the optimizer step on CPU between uses: CUDA only, a no-op on CPU) and ``reshard_after_forward``.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    mp_cfg = fsdp_config.mixed_precision
    param_dtype = _dtype(mp_cfg.param_dtype, torch.bfloat16 if device.type == "cuda" else torch.float32)
    reduce_dtype = _dtype(mp_cfg.reduce_dtype, torch.float32)
    mp_policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype, cast_forward_inputs=True)
    offload = fsdp_config.param_offload or fsdp_config.optimizer_offload
    kwargs: dict[str, Any] = {
        "mesh": init_device_mesh(device.type, (dist.get_world_size(),)),
        "mp_policy": mp_policy,
        "reshard_after_forward": fsdp_config.reshard_after_forward,
    }
    if offload and device.type == "cuda":
        kwargs["offload_policy"] = CPUOffloadPolicy()
    module.to(device)
    layer_classes = set(getattr(module, "_no_split_modules", None) or [])
    layers = [m for m in module.modules() if type(m).__name__ in layer_classes]
    if not layers:
        raise ValueError(
            f"FSDP2: {type(module).__name__} lists no decoder-layer classes in _no_split_modules; "
            "this model type cannot be sharded per layer"
        )
    for layer in layers:
        fully_shard(layer, **kwargs)
    fully_shard(module, **kwargs)
    return module


def is_sharded(module: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


def full_state_dict(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The whole, unsharded weights on every rank (a collective: every rank must call it)."""
    if not is_sharded(module):
        return module.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(module, options=StateDictOptions(full_state_dict=True))


def iter_full_tensors(module: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, whole tensor)`` of ``module``'s state dict, one at a time: a sharded (DTensor) entry is all-gathered
    from its shards when it is reached, so at most one whole tensor beyond the consumer's own is alive at once (the
    weights handed to a rollout engine, bucket by bucket). A collective per sharded entry: every rank must consume
    the whole iterator, in the same order."""
    from torch.distributed.tensor import DTensor

    for name, tensor in module.state_dict().items():
        yield name, tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def local_state_bytes(module: torch.nn.Module, optimizer: torch.optim.Optimizer | None) -> dict[str, int]:
    """Bytes of parameters and optimizer state held by THIS rank (its shards only), and of the whole model."""

    def local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if hasattr(t, "to_local") else t

    params = sum(local(p).numel() * local(p).element_size() for p in module.parameters())
    full = sum(p.numel() * p.element_size() for p in module.parameters())  # a DTensor's numel is the global one
    optim = 0
    if optimizer is not None:
        for state in optimizer.state.values():
            for v in state.values():
                if torch.is_tensor(v) and v.dim() > 0:
                    optim += local(v).numel() * local(v).element_size()
    return {"param_bytes": params, "optim_bytes": optim, "full_param_bytes": full}


def clip_grad_norm(module: torch.nn.Module, max_norm: float) -> torch.Tensor:
    """``clip_grad_norm_`` that also works on sharded (DTensor) gradients; returns the total norm as a plain tensor."""
    norm = torch.nn.utils.clip_grad_norm_(module.parameters(), max_norm)
    return norm.full_tensor() if hasattr(norm, "full_tensor") else norm


@contextlib.contextmanager
def _single_process_quiet():
    """DCP warns that it 'assumes the intent is to save in a single process' when no process group is up: in the
    local backend that is exactly the intent."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _dcp_options(trainable_only: bool):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # LoRA: the frozen base is the model directory's, so only the adapters (and their optimizer state) are saved
    return StateDictOptions(ignore_frozen_params=True, strict=False) if trainable_only else None


def _trainable_only(module: torch.nn.Module, model_sd: dict) -> dict:
    """``model_sd`` without frozen entries: ``ignore_frozen_params`` keeps a frozen tied copy (a tied lm_head)."""
    trainable = {name for name, p in module.named_parameters() if p.requires_grad}
    return {k: v for k, v in model_sd.items() if k in trainable}


def save_dcp(
    path: str, module: torch.nn.Module, optimizer: torch.optim.Optimizer | None, trainable_only: bool = False
) -> None:
    """Model (and optimizer) state under ``path`` with torch distributed checkpoint: every rank writes its shards.
    ``trainable_only``: the parameters that train, without the frozen ones (a LoRA run's adapters)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    options = _dcp_options(trainable_only)
    if optimizer is not None:
        model_sd, optim_sd = get_state_dict(module, optimizer, options=options)
        state = {"model": model_sd, "optim": optim_sd}
    else:
        state = {"model": get_model_state_dict(module, options=options)}
    if trainable_only:
        state["model"] = _trainable_only(module, state["model"])
    with _single_process_quiet():
        dcp.save(state, checkpoint_id=path)


def load_dcp(
    path: str, module: torch.nn.Module, optimizer: torch.optim.Optimizer | None, trainable_only: bool = False
) -> None:
    """Load a `save_dcp` checkpoint into ``module`` (and ``optimizer``), resharding to this run's worker count.
    ``trainable_only``: it was saved so (LoRA); the frozen parameters keep the values they were loaded with."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_state_dict,
        set_model_state_dict,
        set_state_dict,
    )

    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: no distributed checkpoint here (a checkpoint holds dcp/, huggingface/)")
    options = _dcp_options(trainable_only)
    if optimizer is not None:
        model_sd, optim_sd = get_state_dict(module, optimizer, options=options)
        state = {"model": _trainable_only(module, model_sd) if trainable_only else model_sd, "optim": optim_sd}
        with _single_process_quiet():
            dcp.load(state, checkpoint_id=path)
        set_state_dict(
            module, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"], options=options
        )
    else:
        model_sd = get_model_state_dict(module, options=options)
        state = {"model": _trainable_only(module, model_sd) if trainable_only else model_sd}
        with _single_process_quiet():
            dcp.load(state, checkpoint_id=path)
        set_model_state_dict(module, state["model"], options=options)


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum ``t`` over the data-parallel ranks (itself when there is one process)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        device = t.device
        t = t.to("cuda") if dist.get_backend() == "nccl" else t.clone()  # NCCL reduces CUDA tensors only
        dist.all_reduce(t)
        t = t.to(device)
    return t


def all_reduce_max(value: int) -> int:
    """The largest ``value`` over the data-parallel ranks (itself when there is one process)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        t = torch.tensor([value], dtype=torch.int64)
        t = t.to("cuda") if dist.get_backend() == "nccl" else t
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())
    return value


def dp_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def get_fsdp_wrap_policy(module: torch.nn.Module, config: Any = None, is_lora: bool = False):
    """An FSDP1 ``auto_wrap_policy`` for ``module`` (verl's ``fsdp_config.wrap_policy``), for code that wraps with
    ``FullyShardedDataParallel`` itself; this package's workers shard with FSDP2 per decoder layer (`apply_fsdp2`).

    ``config``: the ``wrap_policy`` mapping (a free-form dict in the job schema, or the SFT job's section), read
    as a mapping. ``disable``: None (no auto-wrapping). ``min_num_params`` > 0: wrap every submodule of at least
    that many parameters. Otherwise wrap the layer classes ``transformer_layer_cls_to_wrap`` (default: the model's
    ``_no_split_modules``). ``is_lora``: also wrap every trainable leaf module, so LoRA adapters get their own
    units. Returns None when nothing would be wrapped."""
    import functools

    from torch.distributed.fsdp.wrap import (
        _or_policy,
        lambda_auto_wrap_policy,
        size_based_auto_wrap_policy,
        transformer_auto_wrap_policy,
    )

    policy = dict(config) if config is not None else {}  # one mapping: a dict, a DictConfig or a section
    if policy.get("disable"):
        return None
    policies = []
    if is_lora:

        def trainable_leaf(m: torch.nn.Module) -> bool:
            weight = getattr(m, "weight", None)
            return not list(m.children()) and weight is not None and weight.requires_grad

        policies.append(functools.partial(lambda_auto_wrap_policy, lambda_fn=trainable_leaf))
    min_num_params = policy.get("min_num_params") or 0  # absent or null: no size rule
    configured = policy.get("transformer_layer_cls_to_wrap")
    layer_names = configured or getattr(module, "_no_split_modules", None)
    if min_num_params > 0:
        policies.append(functools.partial(size_based_auto_wrap_policy, min_num_params=min_num_params))
    elif layer_names:
        classes = {type(m) for m in module.modules() if type(m).__name__ in set(layer_names)}
        missing = set(layer_names) - {c.__name__ for c in classes}
        if configured and missing:  # the model's own list may name classes a given config does not use
            raise ValueError(
                f"fsdp wrap_policy.transformer_layer_cls_to_wrap: {type(module).__name__} has no submodule of class "
                f"{sorted(missing)}; its classes include {sorted({type(m).__name__ for m in module.modules()})[:20]}"
            )
        if classes:
            policies.append(functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=classes))
    return functools.partial(_or_policy, policies=policies) if policies else None
