"""A colocated (fused) worker class built in this process: inner workers as attributes that see each other, and
their registered methods found through the class (no Ray needed to build or call it)."""

from verl.single_controller.base import ClassWithInitArgs, Dispatch, Worker, register
from verl.single_controller.base.worker_group import method_mode, resolve_method
from verl.single_controller.ray.base import create_colocated_worker_cls, create_colocated_worker_raw_cls


class Actor(Worker):
    def __init__(self, scale=1):
        self.scale = scale

    @register(Dispatch.ONE_TO_ALL)
    def add(self, x):
        return x + self.scale


class Critic(Worker):
    @register(Dispatch.ALL_TO_ALL)
    def twice_actor(self, x):
        return 2 * self.fused_worker_dict["actor"].add(x)  # an inner worker reaches its neighbours


def test_fused_class_builds_inner_workers_that_see_each_other():
    specs = {"actor": ClassWithInitArgs(Actor, (), {"scale": 10}), "critic": ClassWithInitArgs(Critic)}
    fused_cls = create_colocated_worker_raw_cls(specs)
    assert fused_cls.__name__ == "FusedWorker_actor_critic" and set(fused_cls.raw_cls_dict) == {"actor", "critic"}
    fused = fused_cls()
    fused.bind_device("cpu")
    assert fused.actor.add(1) == 11 and fused.critic.twice_actor(1) == 22
    assert resolve_method(fused, "critic.twice_actor")(0) == 20
    assert method_mode(fused_cls, "actor.add")[0] == Dispatch.ONE_TO_ALL
    assert fused.actor.device.type == "cpu"


def test_older_form_binds_prefixed_methods():
    spec = create_colocated_worker_cls({"actor": ClassWithInitArgs(Actor), "critic": ClassWithInitArgs(Critic)})
    worker = spec.cls()
    assert worker.actor_add(1) == 2 and worker.critic_twice_actor(1) == 4
    assert method_mode(spec.cls, "actor_add")[0] == Dispatch.ONE_TO_ALL
