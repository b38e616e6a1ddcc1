import os

# Tiny models are overhead-bound: one OpenMP thread per process is faster, and it keeps test processes (pytest-xdist
# workers too) and their subprocesses from fighting over the 2 cores. Then verl's thread policy
# (verl.utils.cpu_threads, applied by importing verl): the user's count above stays, the OpenMP wait policy (a short
# spin, then sleep) is added for this process and every subprocess. Both before any test module imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import tiers  # noqa: E402
from tiers import pytest_runtest_call, pytest_runtest_setup  # noqa: E402,F401 (the fast tier's budget hooks)

import verl  # noqa: E402,F401


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the main process (once, before any pytest-xdist worker runs)
        tiers.compile_package()
    tiers.session_speed()  # measured once, before the first test's clock starts


def pytest_collection_modifyitems(items):
    tiers.group_heavy_tests(items)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Built-in datasets and models are generated into a per-session cache, never under the home directory."""
    cache = tmp_path_factory.getbasetemp() / "verl-cache"
    monkeypatch.setenv("VERL_CACHE_DIR", str(cache))
    yield


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """A freshly initialised tiny Qwen2 HF directory, shared by the session's tests."""
    from verl.models.tiny import save_tiny_model

    path = tmp_path_factory.mktemp("tiny-qwen2")
    return save_tiny_model(os.fspath(path))


@pytest.fixture(scope="module")
def tiny_policy():
    """A random-init 2-layer Qwen2 (hidden 64, seed 0) in memory, for the exactness tests of the actor's passes."""
    import torch

    from verl.models.tiny import TinyModelConfig, build_tiny_model, build_tokenizer

    torch.manual_seed(0)
    return build_tiny_model(build_tokenizer(), TinyModelConfig(hidden_size=64, num_layers=2, intermediate_size=128))


@pytest.fixture
def ppo_actor_config():
    """``ppo_actor_config(**overrides)``: the default actor config with a KL loss and no gradient clipping."""
    from omegaconf import OmegaConf

    from verl.utils.config import load_config

    def make(**overrides):
        cfg = load_config("ppo_trainer").actor_rollout_ref.actor
        return OmegaConf.merge(cfg, {"grad_clip": 1.0e9, "use_kl_loss": True, "kl_loss_coef": 0.1, **overrides})

    return make


@pytest.fixture(scope="session")
def path_without_bwrap(tmp_path_factory) -> str:
    """A PATH with every program of this one but bubblewrap: a machine without ``apt-get install bubblewrap``, as a
    new user's is (links to the real programs, so everything else runs as it does here)."""
    bin_dir = tmp_path_factory.mktemp("path-without-bwrap")
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            source, link = os.path.join(folder, name), bin_dir / name
            if name != "bwrap" and not link.exists() and os.access(source, os.X_OK) and os.path.isfile(source):
                link.symlink_to(source)
    return str(bin_dir)


@pytest.fixture
def without_bwrap(path_without_bwrap, monkeypatch) -> str:
    """This process without bubblewrap on its PATH (and the sandbox's cached probe and warning forgotten)."""
    import verl.sandbox.local as local

    monkeypatch.setenv("PATH", path_without_bwrap)
    monkeypatch.delenv(local.ISOLATION_ENV, raising=False)
    monkeypatch.setattr(local, "_bwrap_ok", {})
    monkeypatch.setattr(local, "_warned", False)
    return path_without_bwrap
