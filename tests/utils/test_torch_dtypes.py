"""Reduced-precision autocast: the fp32 default is a no-op, bad names fail with the key, and a CPU that only emulates
bf16 gets one warning naming the key and the fix."""

import contextlib
import logging

import pytest
import torch

from verl.utils import torch_dtypes


def test_fp32_is_no_autocast_and_bad_names_fail():
    assert isinstance(torch_dtypes.autocast_context("cpu", "fp32"), contextlib.nullcontext)
    assert isinstance(torch_dtypes.autocast_context("cpu", None), contextlib.nullcontext)
    with pytest.raises(ValueError, match="my.key='fp8'"):
        torch_dtypes.autocast_context("cpu", "fp8", key="my.key")


def test_emulated_bf16_warns_once_with_the_fix(monkeypatch, caplog):
    monkeypatch.setattr(torch_dtypes, "cpu_has_native", lambda dtype: False)  # as on an AVX2-only CPU
    monkeypatch.setattr(torch_dtypes, "_warned", set())
    with caplog.at_level(logging.WARNING, logger=torch_dtypes.__name__):
        with torch_dtypes.autocast_context("cpu", "bf16", key="actor_rollout_ref.rollout.dtype"):
            assert torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.bfloat16
        torch_dtypes.autocast_context("cpu", "bf16", key="actor_rollout_ref.rollout.dtype")
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert (
        "actor_rollout_ref.rollout.dtype=bf16" in warnings[0]
        and "Set actor_rollout_ref.rollout.dtype=fp32" in warnings[0]
    )


def test_native_check_agrees_with_onednn():
    expected = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert torch_dtypes.cpu_has_native(torch.bfloat16) is expected
    assert torch_dtypes.cpu_has_native(torch.float32) is True


def test_actor_and_rollout_name_their_key_on_a_bad_dtype():
    from verl.workers.actor.dp_actor import autocast_context as actor_autocast
    from verl.workers.rollout import HFRollout

    module = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"actor_rollout_ref\.actor\.autocast_dtype='fp8'"):
        actor_autocast(module, "fp8")
    with pytest.raises(ValueError, match=r"actor_rollout_ref\.rollout\.dtype='fp8'"):
        HFRollout(module, {"dtype": "fp8"}, 0, 1)._autocast()
