"""An agent loop reaches the actor worker's rollout through the worker group: in process on the local backend."""

from __future__ import annotations

import asyncio

import pytest

from verl.single_controller.base.worker_group import ClassWithInitArgs, LocalWorkerGroup
from verl.trainer.ppo.rollout_servers import async_rollout_servers
from verl.utils.config import load_config
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.fsdp_workers import ActorRolloutRefWorker
from verl.workers.rollout import HFRollout, TokenOutput

# every test here shares a module-wide engine, server or cluster that takes many seconds to start
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def actor_rollout_wg():
    cfg = load_config("ppo_trainer", ["actor_rollout_ref.rollout.mode=async"])
    spec = ClassWithInitArgs(ActorRolloutRefWorker, (cfg.actor_rollout_ref,), {"role": "actor_rollout"})
    handle = LocalWorkerGroup({"actor_rollout": spec}).role("actor_rollout")
    handle.init_model()
    return handle


def test_the_local_worker_group_is_the_one_server_and_generates_per_request(actor_rollout_wg):
    servers = async_rollout_servers(actor_rollout_wg)
    assert servers == [actor_rollout_wg]
    worker_rollout = actor_rollout_wg.rollout
    assert type(worker_rollout) is HFRollout  # rollout.name=hf, mode=async through the registry
    tokenizer = actor_rollout_wg.tokenizer
    ds = RLHFDataset("builtin://arithmetic/test?test_size=4", tokenizer, max_prompt_length=64)
    prompts = [ds[i]["input_ids"] for i in range(3)]  # unpadded token-id lists

    async def agent_loop():  # what verl's AsyncLLMServerManager does, one request per sample
        server = servers[0]
        calls = [
            server.generate(request_id=f"s{i}", prompt_ids=p, sampling_params={"temperature": 0.0, "max_tokens": 8})
            for i, p in enumerate(prompts)
        ]
        return await asyncio.gather(*calls)

    outs = asyncio.run(agent_loop())
    assert all(isinstance(o, TokenOutput) and 0 < len(o.token_ids) == len(o.log_probs) <= 8 for o in outs)
    assert worker_rollout._batcher.batch_sizes == [3]


def test_a_group_without_in_process_workers_says_what_is_missing():
    class RayLikeHandle:  # a Ray role group: only @register-ed methods, no worker attributes
        def __getattr__(self, name):
            raise AttributeError(f"role 'actor_rollout' has no registered method {name!r}")

    with pytest.raises(NotImplementedError, match="trainer.backend=local only"):
        async_rollout_servers(RayLikeHandle())
