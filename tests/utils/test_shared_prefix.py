"""The shared-prompt forward (``actor_rollout_ref.model.use_shared_prefix``) computes what the plain path computes:
the same log-probs and entropies and the same update, fp32 on CPU within float tolerance, with each distinct prompt
run once. Deterministic: fixed seeds, so the same numbers on every run."""

import copy

import pytest
import torch

from verl.protocol import DataProto
from verl.utils.shared_prefix import find_shared_prompts, plan_length_chunks, shared_prefix_response_logits
from verl.workers.actor.dp_actor import DataParallelPPOActor

P, R = 7, 9


def grouped_batch(seed: int = 0, groups: int = 4, n: int = 3, vocab: int = 259, pad: int = 0) -> DataProto:
    """``groups`` left-padded prompts of different lengths, each repeated ``n`` times (as the trainer repeats them for
    its samples) with right-padded responses of 0..R tokens."""
    g = torch.Generator().manual_seed(seed)
    prompt_lens = torch.randint(1, P + 1, (groups,), generator=g)
    prompt_lens[0] = P
    prompts = torch.randint(3, vocab, (groups, P), generator=g)
    bs = groups * n
    resp_lens = torch.randint(1, R + 1, (bs,), generator=g)
    resp_lens[0], resp_lens[1], resp_lens[2] = R, 0, 1  # a full response, an empty one, a one-token one
    input_ids = torch.cat([prompts.repeat_interleave(n, 0), torch.randint(3, vocab, (bs, R), generator=g)], 1)
    attention_mask = torch.zeros(bs, P + R, dtype=torch.long)
    for i in range(bs):
        attention_mask[i, P - prompt_lens[i // n] : P + resp_lens[i]] = 1
    input_ids[attention_mask == 0] = pad
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return DataProto.from_dict(
        {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "responses": input_ids[:, P:],
            "response_mask": attention_mask[:, P:].clone(),
            "advantages": torch.randn(bs, R, generator=g),
            "ref_log_prob": -3.0 + 0.1 * torch.randn(bs, R, generator=g),
        },
        meta_info={"temperature": 0.7, "rollout_n": n},
    )


def masked(x, mask):
    return x * mask.to(x.dtype)


def test_length_chunks_minimise_padded_work():
    # sorted lengths 1 1 2 8 9 9: two chunks {1,1,2} (3 x 2) + {8,9,9} (3 x 9) = 33 is the best split
    assert plan_length_chunks([9, 1, 8, 2, 1, 9], 2) == [[1, 4, 3], [2, 0, 5]]
    assert plan_length_chunks([3, 3, 3], 4) == [[0, 1, 2]]  # equal lengths: one chunk is as good, and fewer calls
    assert plan_length_chunks([0, 5, 0], 4) == [[1]]  # rows with nothing to compute are left out
    assert plan_length_chunks([], 3) == []
    chunks = plan_length_chunks([4, 7, 1, 1, 9, 2, 7, 3], 3)
    assert sorted(i for c in chunks for i in c) == list(range(8)) and len(chunks) <= 3


def test_find_shared_prompts_numbers_prompts_by_first_occurrence():
    b = grouped_batch(groups=3, n=2).batch
    order = torch.tensor([4, 0, 5, 1, 2, 3])  # groups appear as 2, 0, 2, 0, 1, 1
    first, inverse = find_shared_prompts(b["input_ids"][order], b["attention_mask"][order], b["position_ids"][order], P)
    assert first.tolist() == [0, 1, 4]
    assert inverse.tolist() == [0, 1, 0, 1, 2, 2]


@pytest.mark.parametrize("max_chunks", [1, 4])
def test_shared_prefix_log_probs_and_gradients_equal_the_plain_forward(tiny_policy, max_chunks):
    from verl.utils.torch_functional import logprobs_and_entropy_from_logits
    from verl.workers.actor.dp_actor import forward_response_logits

    b = grouped_batch(seed=1).batch
    mask = b["response_mask"]
    module = copy.deepcopy(tiny_policy).train()
    logits, index = shared_prefix_response_logits(module, b, R, 0.7, max_chunks=max_chunks)
    assert index.num_prompts == 4
    assert logits.shape[0] == int(mask.sum())  # real response tokens only
    lp, _ = logprobs_and_entropy_from_logits(logits, index.labels, False, False)
    shared = torch.zeros(mask.shape).index_put((index.rows, index.cols), lp)
    shared.sum().backward()
    grads = {k: p.grad.clone() for k, p in module.named_parameters()}
    module.zero_grad()
    plain, _ = logprobs_and_entropy_from_logits(forward_response_logits(module, b, R, 0.7), b["responses"])
    masked(plain, mask).sum().backward()
    torch.testing.assert_close(shared, masked(plain, mask), atol=1e-5, rtol=1e-5)
    for name, p in module.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, atol=1e-5, rtol=1e-4, msg=f"gradient of {name}")


def test_nothing_shared_or_checkpointing_falls_back(tiny_policy):
    b = grouped_batch(groups=4, n=1).batch
    assert shared_prefix_response_logits(tiny_policy, b, R, 1.0) is None  # every prompt distinct
    module = copy.deepcopy(tiny_policy)
    module.gradient_checkpointing_enable()
    module.train()
    assert shared_prefix_response_logits(module, grouped_batch().batch, R, 1.0) is None  # no cache in training
    module.eval()
    assert shared_prefix_response_logits(module, grouped_batch().batch, R, 1.0) is not None


@pytest.mark.parametrize("use_remove_padding", [False, True])
def test_actor_log_probs_with_shared_prefix_equal_the_plain_ones(tiny_policy, ppo_actor_config, use_remove_padding):
    data = grouped_batch(seed=2)
    data.meta_info["micro_batch_size"] = 6  # two groups per micro-batch
    lp0, ent0 = DataParallelPPOActor(ppo_actor_config(), tiny_policy).compute_log_prob(data, calculate_entropy=True)
    actor = DataParallelPPOActor(
        ppo_actor_config(), tiny_policy, use_remove_padding=use_remove_padding, use_shared_prefix=True
    )
    lp1, ent1 = actor.compute_log_prob(data, calculate_entropy=True)
    mask = data.batch["response_mask"]
    torch.testing.assert_close(masked(lp1, mask), masked(lp0, mask), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked(ent1, mask), masked(ent0, mask), atol=1e-5, rtol=1e-5)
    assert (lp1[mask == 0] == 0).all()


@pytest.mark.slow
@pytest.mark.parametrize("use_dynamic_bsz", [False, True])
def test_update_with_shared_prefix_equals_the_plain_update(tiny_policy, ppo_actor_config, use_dynamic_bsz):
    data = grouped_batch(seed=3)
    old, _ = DataParallelPPOActor(ppo_actor_config(), tiny_policy).compute_log_prob(data)
    data.batch["old_log_probs"] = old - 0.05 * data.batch["advantages"].sign()  # a ratio != 1: clipping is live
    cfg = dict(ppo_mini_batch_size=len(data), ppo_micro_batch_size_per_gpu=6, entropy_coeff=0.01)
    if use_dynamic_bsz:
        cfg.update(use_dynamic_bsz=True, ppo_max_token_len_per_gpu=60)
    weights = []
    for shared in (False, True):
        module = copy.deepcopy(tiny_policy)
        opt = torch.optim.SGD(module.parameters(), lr=1.0)  # the weight change is exactly -grad
        actor = DataParallelPPOActor(ppo_actor_config(**cfg), module, opt, use_shared_prefix=shared)
        actor.update_policy(data)
        weights.append(module)
    moved = max((p - q).abs().max().item() for p, q in zip(weights[0].parameters(), tiny_policy.parameters()))
    assert moved > 1e-4
    for (name, p), q in zip(weights[0].named_parameters(), weights[1].parameters()):
        torch.testing.assert_close(q, p, atol=1e-5, rtol=1e-4, msg=f"{name} differs")


def test_token_budget_micro_batches_keep_a_prompts_rows_together():
    from verl.utils.seqlen_balancing import rearrange_micro_batches

    data = grouped_batch(seed=4, groups=5, n=3)
    _, inverse = find_shared_prompts(
        data.batch["input_ids"], data.batch["attention_mask"], data.batch["position_ids"], P
    )
    micros, groups = rearrange_micro_batches(data, max_token_len=40, keep_prompts_together=True)
    assert sorted(i for g in groups for i in g) == list(range(len(data)))
    assert len(groups) > 1
    for g in groups:  # every prompt's rows sit in one micro-batch
        prompts = set(inverse[g].tolist())
        assert sorted(g) == sorted(torch.nonzero(torch.isin(inverse, torch.tensor(list(prompts)))).squeeze(1).tolist())
    # data-parallel ranks may need more micro-batches than there are prompts: rows are then split as usual
    _, many = rearrange_micro_batches(data, max_token_len=40, min_micro_batches=8, keep_prompts_together=True)
    assert len(many) == 8


def test_exact_chunk_count_for_data_parallel_ranks():
    # ranks agree on a chunk count (FSDP needs the same forward calls): a rank plans exactly that many when it can
    assert len(plan_length_chunks([3, 3, 3, 3], 3, exact=True)) == 3
    assert len(plan_length_chunks([3, 3, 3, 3], 3)) == 1
    assert len(plan_length_chunks([3, 0], 3, exact=True)) == 1  # fewer rows than chunks: the caller pads


def test_shared_prefix_gradients_are_bit_identical_run_after_run_with_two_threads(tiny_policy):
    """Same inputs, same gradient bits with 2 intra-op threads. The rows of a response chunk mix prompts, so the
    gathers of the prompts' keys/values and first logits repeat indices out of order: advanced indexing's backward
    (atomic adds over threads) gave different bits in most runs here; ``index_select``'s adds in index order."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        b = grouped_batch(seed=2, groups=16, n=8).batch  # 128 rows: the gathers are above the parallel grain size
        module = copy.deepcopy(tiny_policy).train()

        def gradients() -> list[torch.Tensor]:
            module.zero_grad()
            logits, index = shared_prefix_response_logits(module, b, R, 0.7)
            torch.log_softmax(logits, -1).gather(-1, index.labels[:, None]).sum().backward()
            return [p.grad.clone() for p in module.parameters()]

        first = gradients()
        for _ in range(10):
            assert all(torch.equal(a, g) for a, g in zip(first, gradients()))
    finally:
        torch.set_num_threads(threads)
