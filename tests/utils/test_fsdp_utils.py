"""`get_fsdp_wrap_policy` wraps what verl's FSDP1 policy would, on a real tiny HF model."""

import pytest


def _wrapped(policy, model):
    """Names of the submodules the policy wraps (FSDP asks it bottom-up with ``recurse=False``)."""
    return sorted(
        type(m).__name__
        for m in model.modules()
        if m is not model and policy(module=m, recurse=False, nonwrapped_numel=sum(p.numel() for p in m.parameters()))
    )


def test_default_wraps_the_decoder_layers(tiny_policy):
    from verl.utils.fsdp_utils import get_fsdp_wrap_policy

    policy = get_fsdp_wrap_policy(tiny_policy)
    assert set(_wrapped(policy, tiny_policy)) == set(tiny_policy._no_split_modules)
    assert get_fsdp_wrap_policy(tiny_policy, {"disable": True}) is None
    by_size = get_fsdp_wrap_policy(tiny_policy, {"min_num_params": 10_000})
    assert "Embedding" in _wrapped(by_size, tiny_policy)
    with pytest.raises(ValueError, match="no submodule of class \\['Block'\\]"):
        get_fsdp_wrap_policy(tiny_policy, {"transformer_layer_cls_to_wrap": ["Block"]})


def test_lora_wraps_trainable_leaves_too(tiny_policy):
    from verl.utils.fsdp_utils import get_fsdp_wrap_policy

    for p in tiny_policy.parameters():
        p.requires_grad_(False)
    tiny_policy.lm_head.weight.requires_grad_(True)
    try:
        wrapped = _wrapped(get_fsdp_wrap_policy(tiny_policy, is_lora=True), tiny_policy)
        assert "Linear" in wrapped  # the trainable head
    finally:
        for p in tiny_policy.parameters():
            p.requires_grad_(True)


def test_iter_full_tensors_of_an_unsharded_module_is_its_state_dict(tiny_policy):
    """The sharded case (all-gathered DTensors on 2 Ray workers) is checked end to end by
    tests/workers/rollout/test_vllm_ray.py: the engines decode exactly as the gathered weights do."""
    import torch

    from verl.utils.fsdp_utils import iter_full_tensors

    streamed = list(iter_full_tensors(tiny_policy))
    state = tiny_policy.state_dict()
    assert [name for name, _ in streamed] == list(state)
    assert all(torch.equal(t, state[name]) for name, t in streamed)
