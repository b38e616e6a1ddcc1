"""Every fast path of the actor computes what the plain path computes (float tolerance, fp32 on CPU):
packed (use_remove_padding) log-probs and entropies, token-budget micro-batches (use_dynamic_bsz) with exact loss
weights, the fused log-prob + entropy, and the update without an old-log-prob pass (on-policy)."""

import copy
import math

import pytest
import torch
from omegaconf import OmegaConf

from verl.models.tiny import TinyModelConfig, build_tiny_model, build_tokenizer
from verl.protocol import DataProto
from verl.trainer.ppo import core_algos
from verl.utils.config import load_config
from verl.utils.remove_padding import pack_sequences
from verl.utils.seqlen_balancing import get_reverse_idx, partition_by_token_budget
from verl.utils.torch_functional import entropy_from_logits, logprobs_and_entropy_from_logits, logprobs_from_logits
from verl.workers.actor.dp_actor import DataParallelPPOActor

P, R = 7, 9


def make_batch(seed: int = 0, bs: int = 10, vocab: int = 259, pad: int = 0) -> DataProto:
    """Left-padded prompts (1..P tokens) + right-padded responses (0..R tokens), as the rollout writes them."""
    g = torch.Generator().manual_seed(seed)
    prompt_lens = torch.randint(1, P + 1, (bs,), generator=g)
    resp_lens = torch.randint(1, R + 1, (bs,), generator=g)
    resp_lens[0], prompt_lens[1], resp_lens[2] = 0, P, R  # edge rows: empty response, full prompt, full response
    input_ids = torch.randint(3, vocab, (bs, P + R), generator=g)
    attention_mask = torch.zeros(bs, P + R, dtype=torch.long)
    for i in range(bs):
        attention_mask[i, P - prompt_lens[i] : P + resp_lens[i]] = 1
    input_ids[attention_mask == 0] = pad
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    responses = input_ids[:, P:]
    return DataProto.from_dict(
        {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "responses": responses,
            "response_mask": attention_mask[:, P:].clone(),
            "advantages": torch.randn(bs, R, generator=g),
            "ref_log_prob": -3.0 + 0.1 * torch.randn(bs, R, generator=g),
        },
        meta_info={"temperature": 0.7, "rollout_n": 1},
    )


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_tiny_model(build_tokenizer(), TinyModelConfig(hidden_size=64, num_layers=2, intermediate_size=128))


def actor_config(**overrides):
    cfg = load_config("ppo_trainer").actor_rollout_ref.actor
    cfg = OmegaConf.merge(cfg, {"grad_clip": 1.0e9, "use_kl_loss": True, "kl_loss_coef": 0.1, **overrides})
    return cfg


def masked(x, mask):
    return x * mask.to(x.dtype)


def test_fused_logprob_and_entropy_match_the_separate_functions():
    logits = torch.randn(3, 5, 11) * 4
    labels = torch.randint(0, 11, (3, 5))
    lp, ent = logprobs_and_entropy_from_logits(logits, labels)
    torch.testing.assert_close(lp, logprobs_from_logits(logits, labels), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(ent, entropy_from_logits(logits), atol=1e-5, rtol=1e-5)


def test_packing_puts_every_real_token_once_with_restarting_positions():
    data = make_batch()
    b = data.batch
    packed = pack_sequences(b["input_ids"], b["attention_mask"], R)
    assert packed.num_tokens == int(b["attention_mask"].sum())
    assert packed.input_ids.shape[1] == int(b["attention_mask"].sum(-1).max())
    assert packed.input_ids.shape[0] < len(data)  # short sequences share rows
    assert len(packed.labels) == int(b["response_mask"].sum())
    torch.testing.assert_close(packed.labels, b["responses"][packed.rows, packed.cols])
    starts = (packed.position_ids == 0).sum()
    assert starts >= sum(1 for n in b["attention_mask"].sum(-1).tolist() if n)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_packed_log_probs_and_entropy_equal_the_padded_ones(model, temperature):
    data = make_batch()
    data.meta_info.update(temperature=temperature, micro_batch_size=4)
    plain = DataParallelPPOActor(actor_config(), model)
    packed = DataParallelPPOActor(actor_config(), model, use_remove_padding=True)
    lp0, ent0 = plain.compute_log_prob(data, calculate_entropy=True)
    lp1, ent1 = packed.compute_log_prob(data, calculate_entropy=True)
    mask = data.batch["response_mask"]
    torch.testing.assert_close(masked(lp1, mask), masked(lp0, mask), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked(ent1, mask), masked(ent0, mask), atol=1e-5, rtol=1e-5)
    assert (lp1[mask == 0] == 0).all()


def test_token_budget_partition_is_balanced_complete_and_within_budget():
    lengths = [5, 17, 3, 9, 30, 2, 11, 8, 8, 40]
    groups = partition_by_token_budget(lengths, 45)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in g) <= 45 for g in groups)
    assert len(groups) == 3  # 133 tokens: the fewest possible, ceil(133 / 45)
    assert partition_by_token_budget([30, 30, 30], 45) == [[0], [1], [2]]  # no two fit together: one more
    assert partition_by_token_budget([50, 1], 10) == [[0], [1]]  # an over-long row gets its own micro-batch
    out = torch.tensor([i for g in groups for i in g])
    assert out[get_reverse_idx(groups)].tolist() == list(range(len(lengths)))


@pytest.mark.parametrize("use_remove_padding", [False, True])
def test_dynamic_bsz_log_probs_equal_the_plain_ones_in_batch_order(model, use_remove_padding):
    data = make_batch(seed=1)
    data.meta_info["micro_batch_size"] = len(data)
    lp0, ent0 = DataParallelPPOActor(actor_config(), model).compute_log_prob(data, calculate_entropy=True)
    data.meta_info.update(use_dynamic_bsz=True, max_token_len=20)
    actor = DataParallelPPOActor(actor_config(), model, use_remove_padding=use_remove_padding)
    lp1, ent1 = actor.compute_log_prob(data, calculate_entropy=True)
    mask = data.batch["response_mask"]
    torch.testing.assert_close(masked(lp1, mask), masked(lp0, mask), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked(ent1, mask), masked(ent0, mask), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", list(core_algos.LOSS_AGG_MODES))
def test_loss_weights_make_unequal_micro_batch_accumulation_exact(mode):
    g = torch.Generator().manual_seed(0)
    loss = torch.randn(10, 6, generator=g)
    mask = (torch.rand(10, 6, generator=g) > 0.4).long()
    mask[3] = 0
    whole = core_algos.agg_loss(loss, mask, mode)
    parts = [[0, 1, 2], [3, 4, 5, 6, 7], [8, 9]]
    counts = core_algos.loss_normalizer_counts(mask)
    acc = sum(
        core_algos.micro_batch_loss_weight(mask[p], counts, mode) * core_algos.agg_loss(loss[p], mask[p], mode)
        for p in parts
    )
    torch.testing.assert_close(acc, whole, atol=1e-6, rtol=1e-6)


def _one_update(model, data, **cfg_overrides):
    """One update_policy with plain SGD (lr 1): the weight change is exactly -grad, so weights compare gradients."""
    module = copy.deepcopy(model)
    use_rmpad = cfg_overrides.pop("use_remove_padding", False)
    opt = torch.optim.SGD(module.parameters(), lr=1.0)
    actor = DataParallelPPOActor(actor_config(**cfg_overrides), module, opt, use_remove_padding=use_rmpad)
    metrics = actor.update_policy(data)
    return module, metrics


def _assert_same_weights(a, b, atol=1e-5):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(p, q, atol=atol, rtol=1e-4, msg=f"{name} differs")


@pytest.mark.slow
@pytest.mark.parametrize("loss_agg_mode", list(core_algos.LOSS_AGG_MODES))
def test_every_micro_batching_gives_the_whole_mini_batch_gradient(model, loss_agg_mode):
    data = make_batch(seed=2)
    old, _ = DataParallelPPOActor(actor_config(), model).compute_log_prob(data)
    shift = 0.4 * torch.rand(old.shape, generator=torch.Generator().manual_seed(0))
    data.batch["old_log_probs"] = old - shift * data.batch["advantages"].sign()  # ratios 1..1.5: some clipped
    common = dict(ppo_mini_batch_size=len(data), loss_agg_mode=loss_agg_mode)
    ref, m_ref = _one_update(model, data, ppo_micro_batch_size_per_gpu=len(data), **common)
    fixed, m_fixed = _one_update(model, data, ppo_micro_batch_size_per_gpu=3, **common)
    dynamic, m_dyn = _one_update(model, data, use_dynamic_bsz=True, ppo_max_token_len_per_gpu=25, **common)
    assert 0 < m_ref["actor/pg_clipfrac"][0] < 1
    for metrics in (m_fixed, m_dyn):  # the logged metrics, too, are the whole mini-batch's (rates stay rates)
        for key in ("actor/pg_loss", "actor/kl_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/kl_coef"):
            assert metrics[key] == pytest.approx(m_ref[key], rel=1e-5, abs=1e-7), key
    packed, _ = _one_update(
        model, data, use_dynamic_bsz=True, ppo_max_token_len_per_gpu=25, use_remove_padding=True, **common
    )
    moved = max((p - q).abs().max().item() for p, q in zip(ref.parameters(), model.parameters()))
    assert moved > 1e-4  # the update did something
    for other in (fixed, dynamic, packed):
        _assert_same_weights(other, ref)


@pytest.mark.slow
@pytest.mark.parametrize("loss_mode", ["sapo", "geo_mean", "dppo_tv", "dppo_kl", "cispo", "gpg"])
def test_verl_policy_losses_run_through_the_actor_with_exact_micro_batching(model, loss_mode):
    """Each registered loss's (loss, metrics) reaches the update: micro-batches of 3 rows give the whole mini-batch's
    gradient, and the loss's own metrics are logged."""
    data = make_batch(seed=8)
    old, _ = DataParallelPPOActor(actor_config(), model).compute_log_prob(data)
    data.batch["old_log_probs"] = old - 0.3 * torch.rand(old.shape, generator=torch.Generator().manual_seed(1))
    common = dict(ppo_mini_batch_size=len(data), policy_loss={"loss_mode": loss_mode}, clip_ratio=0.1)
    ref, m_ref = _one_update(model, data, ppo_micro_batch_size_per_gpu=len(data), **common)
    micro, m_micro = _one_update(model, data, ppo_micro_batch_size_per_gpu=3, **common)
    _assert_same_weights(micro, ref)
    _, own_metrics = core_algos.get_policy_loss_fn(loss_mode)(old, old, data.batch["advantages"], torch.ones_like(old))
    expected_keys = set(own_metrics)
    assert expected_keys <= set(m_ref) and "actor/pg_loss" in m_ref
    for key in expected_keys | {"actor/pg_loss"}:
        assert m_micro[key] == pytest.approx(m_ref[key], rel=1e-5, abs=1e-7), key


@pytest.mark.slow
def test_on_policy_update_without_old_log_probs_equals_the_explicit_pass(model):
    data = make_batch(seed=3)
    data.meta_info["temperature"] = 1.0
    old, ent = DataParallelPPOActor(actor_config(), model).compute_log_prob(data, calculate_entropy=True)
    explicit = copy.deepcopy(data)
    explicit.batch["old_log_probs"] = old
    common = dict(ppo_mini_batch_size=len(data), ppo_micro_batch_size_per_gpu=4)
    a, ma = _one_update(model, explicit, **common)
    b, mb = _one_update(model, data, **common)  # no old_log_probs: the skipped pass
    _assert_same_weights(a, b, atol=1e-6)
    for key in ("actor/pg_loss", "actor/kl_loss", "actor/ppo_kl"):
        torch.testing.assert_close(torch.tensor(mb[key]), torch.tensor(ma[key]), atol=1e-6, rtol=1e-5)
    expected = core_algos.agg_loss(ent, data.batch["response_mask"].float(), "token-mean").item()
    assert mb["actor/entropy"] == pytest.approx([expected], abs=1e-5)  # the metric the old pass would have logged


def test_bf16_autocast_stays_close_to_fp32(model):
    data = make_batch(seed=4)
    lp0, _ = DataParallelPPOActor(actor_config(), model).compute_log_prob(data)
    lp1, _ = DataParallelPPOActor(actor_config(autocast_dtype="bf16"), model).compute_log_prob(data)
    mask = data.batch["response_mask"].bool()
    assert lp1.dtype == torch.float32
    assert (lp1[mask] - lp0[mask]).abs().max() < 0.1


@pytest.mark.slow
def test_gspo_averages_per_sequence_whatever_loss_agg_mode_says(model, caplog):
    """GSPO's objective is (1/G) sum over sequences: with the default token-mean setting the update equals the
    seq-mean-token-mean one (policy, KL and micro-batch weights alike), and a warning says so."""
    data = make_batch(seed=5)
    old, _ = DataParallelPPOActor(actor_config(), model).compute_log_prob(data)
    data.batch["old_log_probs"] = old - 0.05 * data.batch["advantages"].sign()
    common = dict(ppo_mini_batch_size=len(data), ppo_micro_batch_size_per_gpu=3, policy_loss={"loss_mode": "gspo"})
    seq, m_seq = _one_update(model, data, loss_agg_mode="seq-mean-token-mean", **common)
    with caplog.at_level("WARNING"):
        tok, m_tok = _one_update(model, data, loss_agg_mode="token-mean", **common)
    _assert_same_weights(seq, tok, atol=1e-6)
    assert m_tok["actor/pg_loss"] == pytest.approx(m_seq["actor/pg_loss"], abs=1e-7)
    assert "aggregates with seq-mean-token-mean" in caplog.text
    vanilla, _ = _one_update(model, data, loss_agg_mode="token-mean", ppo_mini_batch_size=len(data))
    assert any(not torch.equal(p, q) for p, q in zip(vanilla.parameters(), tok.parameters()))


@pytest.mark.slow
def test_truncated_importance_sampling_reaches_the_update(model):
    """actor.tis_imp_ratio_cap: the sampler's own log-probs (rollout_log_probs) weight the loss; a batch without
    them is an error naming the key."""
    data = make_batch(seed=6)
    old, _ = DataParallelPPOActor(actor_config(), model).compute_log_prob(data)
    data.batch["old_log_probs"] = old
    data.batch["rollout_log_probs"] = old + 5.0  # the sampler saw these tokens as far likelier: weight e^-5
    common = dict(ppo_mini_batch_size=len(data), ppo_micro_batch_size_per_gpu=len(data), use_kl_loss=False)
    plain, _ = _one_update(model, data, **common)
    capped, _ = _one_update(model, data, tis_imp_ratio_cap=2.0, **common)
    step_plain = sum((p - q).abs().sum().item() for p, q in zip(plain.parameters(), model.parameters()))
    step_capped = sum((p - q).abs().sum().item() for p, q in zip(capped.parameters(), model.parameters()))
    assert step_capped == pytest.approx(step_plain * math.exp(-5.0), rel=1e-3)
    del data.batch["rollout_log_probs"]
    with pytest.raises(KeyError, match="rollout_log_probs"):
        _one_update(model, data, tis_imp_ratio_cap=2.0, **common)


def test_missing_old_log_probs_off_policy_is_an_error(model):
    data = make_batch(seed=7)
    with pytest.raises(KeyError, match="no 'old_log_probs'.*ppo_epochs=2"):
        _one_update(model, data, ppo_mini_batch_size=len(data), ppo_epochs=2)


@pytest.mark.slow
@pytest.mark.parametrize("entropy_coeff", [0.0, 0.01])
def test_chunked_log_prob_pass_gives_the_default_passs_update(model, entropy_coeff):
    """``entropy_from_logits_with_chunking``: the same update (log-probs, entropy and its gradient when it is in the
    loss) as the one-log-softmax pass, to float rounding; bit for bit the same on a second run."""
    data = make_batch(seed=5)
    old, _ = DataParallelPPOActor(actor_config(), model).compute_log_prob(data)
    data.batch["old_log_probs"] = old
    common = dict(ppo_mini_batch_size=len(data), ppo_micro_batch_size_per_gpu=4, entropy_coeff=entropy_coeff)
    plain, m_plain = _one_update(model, data, **common)
    chunked, m_chunked = _one_update(model, data, entropy_from_logits_with_chunking=True, **common)
    again, _ = _one_update(model, data, entropy_from_logits_with_chunking=True, **common)
    _assert_same_weights(chunked, plain)
    for key in ("actor/pg_loss", "actor/kl_loss") + (("actor/entropy",) if entropy_coeff else ()):
        assert m_chunked[key] == pytest.approx(m_plain[key], rel=1e-5, abs=1e-7), key
    lp_plain, ent_plain = DataParallelPPOActor(actor_config(), model).compute_log_prob(data, calculate_entropy=True)
    chunked_actor = DataParallelPPOActor(actor_config(entropy_from_logits_with_chunking=True), model)
    lp, ent = chunked_actor.compute_log_prob(data, calculate_entropy=True)
    mask = data.batch["response_mask"]
    torch.testing.assert_close(masked(lp, mask), masked(lp_plain, mask), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked(ent, mask), masked(ent_plain, mask), atol=1e-5, rtol=1e-5)
    assert all(torch.equal(p, q) for p, q in zip(chunked.parameters(), again.parameters()))
