"""verl's way of building a Ray worker group, in one Ray session: ranks and environment from the group, bound
methods, execute_all_sync, non-blocking calls, custom (n-d) dispatch and fused inner workers."""

import os

import pytest
import torch

ray = pytest.importorskip("ray")

from verl.protocol import DataProto  # noqa: E402
from verl.single_controller.base import Dispatch, Worker, register  # noqa: E402
from verl.single_controller.base.decorator import make_nd_compute_dataproto_dispatch_fn  # noqa: E402
from verl.single_controller.ray import (  # noqa: E402
    RayClassWithInitArgs,
    RayResourcePool,
    RayWorkerGroup,
    create_colocated_worker_raw_cls,
)

# every test here shares a module-wide engine, server or cluster that takes many seconds to start
pytestmark = pytest.mark.slow


@ray.remote
class Adder(Worker):
    def __init__(self, offset=0):
        self.offset = offset
        self._register_dispatch_collect_info("dp", dp_rank=self.rank // 2, is_collect=self.rank % 2 == 0)

    def getenv(self, key):
        return os.environ.get(key)

    @register(Dispatch.ONE_TO_ALL)
    def where(self):
        return (self.rank, self.world_size)

    @register(Dispatch.DP_COMPUTE_PROTO)
    def add(self, data):
        data.batch["x"] = data.batch["x"] + self.offset + self.rank
        return data

    @register(Dispatch.ONE_TO_ALL, blocking=False)
    async def later(self, x):
        return x * 10 + self.rank

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn("dp"))
    def nd(self, data):
        data.batch["x"] = data.batch["x"] * 0 + self.rank
        return data


@ray.remote  # as in verl's recipes; Ray then ships the class by value to the workers
class Inner(Worker):
    @register(Dispatch.ONE_TO_ALL)
    def rank_plus(self, x):
        return x + self.rank


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    """A local cluster started the way the trainer starts one (its auth and temp-dir handling), so the test runs
    in one pytest process with the trainer's own Ray tests."""
    from verl.single_controller.ray.cluster import init_ray, shutdown_ray

    session = init_ray(str(tmp_path_factory.mktemp("ray-run")), num_cpus=4)
    yield
    shutdown_ray(session)


def test_verl_style_group(ray_session):
    pool = RayResourcePool(process_on_nodes=[4], use_gpu=False)
    wg = RayWorkerGroup(pool, RayClassWithInitArgs(Adder, offset=100), worker_env={"MY_FLAG": "on"})
    assert wg.where() == [(0, 4), (1, 4), (2, 4), (3, 4)]  # ranks from the group's environment
    assert wg.execute_all_sync("getenv", "RAY_LOCAL_WORLD_SIZE") == ["4"] * 4
    assert wg.execute_all_sync("getenv", key=["MY_FLAG"] * 4) == ["on"] * 4  # one item per rank
    assert len(set(wg.execute_all_sync("getenv", "MASTER_PORT"))) == 1
    out = wg.add(DataProto.from_dict({"x": torch.zeros(8)}))
    assert out.batch["x"].tolist() == [100, 100, 101, 101, 102, 102, 103, 103]
    refs = wg.later(1)
    assert ray.get(refs) == [10, 11, 12, 13]
    nd = wg.nd(DataProto.from_dict({"x": torch.zeros(4)}))  # 2 data-parallel ranks: chunks to ranks 0-1 and 2-3
    assert nd.batch["x"].tolist() == [0, 0, 2, 2]  # collected from ranks 0 and 2
    with pytest.raises(ValueError, match="may not set \\['RANK'\\]"):
        RayWorkerGroup(pool, RayClassWithInitArgs(Adder), worker_env={"RANK": "9"})
    wg.shutdown()
    pool.remove()


def test_fused_inner_workers_through_the_group(ray_session):
    fused = create_colocated_worker_raw_cls({"inner": RayClassWithInitArgs(Inner)})
    pool = RayResourcePool([2], use_gpu=False)
    wg = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=RayClassWithInitArgs(fused))
    wg.fuse(["inner"])
    assert wg.inner.rank_plus(5) == [5, 6]
    with pytest.raises(ValueError, match="no inner workers \\['critic'\\]"):
        wg.spawn(["critic"])
    wg.shutdown()
    pool.remove()
