"""The padding and mask helpers ported code calls, and the distributed statistics against one-process references."""

import pytest
import torch

from verl.utils.errors import InvalidArgumentError
from verl.utils.torch_functional import (
    distributed_masked_mean,
    distributed_mean_max_min_std,
    expand_as_nested,
    get_response_mask,
    pad_2d_list_to_length,
    pad_sequence_to_length,
)


def test_response_mask_keeps_tokens_up_to_the_first_eos():
    ids = torch.tensor([[5, 6, 2, 0, 0], [5, 1, 7, 2, 0], [5, 6, 7, 8, 9]])
    assert get_response_mask(ids, eos_token=2).tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1] * 5]
    assert get_response_mask(ids, eos_token=[1, 2]).tolist()[1] == [1, 1, 0, 0, 0]
    assert get_response_mask(ids, eos_token=2, dtype=torch.bool).dtype == torch.bool


def test_padding_helpers():
    assert pad_2d_list_to_length([[1, 2], [3]], pad_token_id=0).tolist() == [[1, 2], [3, 0]]
    assert pad_2d_list_to_length([[1, 2], [3]], 9, max_length=4).tolist() == [[1, 2, 9, 9], [3, 9, 9, 9]]
    x = torch.tensor([[1, 2]])
    assert pad_sequence_to_length(x, 4, 0).tolist() == [[1, 2, 0, 0]]
    assert pad_sequence_to_length(x, 4, 0, left_pad=True).tolist() == [[0, 0, 1, 2]]
    assert pad_sequence_to_length(x, 1, 0) is x


def test_expand_as_nested_repeats_each_value_over_its_row():
    nested = torch.nested.as_nested_tensor([torch.zeros(2), torch.zeros(3)], layout=torch.jagged)
    out = expand_as_nested(torch.tensor([7, 8]), nested)
    assert out.values().tolist() == [7, 7, 8, 8, 8] and torch.equal(out.offsets(), nested.offsets())
    with pytest.raises(InvalidArgumentError, match="must be a \\(jagged\\) nested tensor"):
        expand_as_nested(torch.tensor([7, 8]), torch.zeros(2, 3))
    with pytest.raises(AssertionError, match="3 values for a nested tensor of 2 rows"):  # verl code catches this
        expand_as_nested(torch.tensor([1, 2, 3]), nested)


def test_distributed_statistics_in_a_one_process_group(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "s"), 1), rank=0, world_size=1)
    try:
        x = torch.tensor([1.0, 2.0, 4.0, 9.0])
        mean, mx, mn, std = distributed_mean_max_min_std(x)
        assert (mean.item(), mx.item(), mn.item()) == (4.0, 9.0, 1.0)
        assert torch.allclose(std, x.std())  # sample std, N - 1
        assert distributed_mean_max_min_std(x, False, False, False)[1:] == (None, None, None)
        assert distributed_masked_mean(x, torch.tensor([1.0, 0.0, 1.0, 0.0])).item() == 2.5
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("calculate_entropy, entropy_grad", [(True, True), (True, False), (False, False)])
def test_chunked_log_probs_and_entropy_equal_the_log_softmax_pass_with_their_gradients(calculate_entropy, entropy_grad):
    from verl.utils.torch_functional import chunked_logprobs_and_entropy, logprobs_and_entropy_from_logits

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 7, 50, generator=g, dtype=torch.float64)  # (bs, R, V): flattened and restored
    labels = torch.randint(0, 50, (3, 7), generator=g)
    w_lp, w_h = torch.randn(3, 7, generator=g), torch.randn(3, 7, generator=g)
    grads, outs = [], []
    for fn, kwargs in ((logprobs_and_entropy_from_logits, {}), (chunked_logprobs_and_entropy, {"chunk": 4})):
        x = logits.clone().requires_grad_()
        lp, h = fn(x, labels, calculate_entropy, entropy_grad, **kwargs)
        loss = (lp.double() * w_lp).sum() + ((h.double() * w_h).sum() if h is not None and entropy_grad else 0)
        loss.backward()
        outs.append((lp, h))
        grads.append(x.grad)
    torch.testing.assert_close(outs[1][0].double(), outs[0][0].double(), atol=1e-6, rtol=0)
    if calculate_entropy:
        torch.testing.assert_close(outs[1][1].double(), outs[0][1].double(), atol=1e-6, rtol=0)
    else:
        assert outs[1][1] is None
    torch.testing.assert_close(grads[1], grads[0], atol=1e-6, rtol=0)
