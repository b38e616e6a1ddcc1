import os

# Tiny models are overhead-bound: one OpenMP thread per process is faster, and it keeps test processes and their
# subprocesses from fighting over the 2 cores. Set before torch is imported by any test module.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402


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
