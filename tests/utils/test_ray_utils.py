"""`parallel_put` keeps the input order (one short Ray session)."""

import pytest

ray = pytest.importorskip("ray")

from verl.utils.errors import InvalidArgumentError  # noqa: E402
from verl.utils.ray_utils import parallel_put  # noqa: E402


@pytest.mark.slow
def test_parallel_put_keeps_order_and_rejects_nothing(tmp_path):
    from verl.single_controller.ray.cluster import init_ray, shutdown_ray

    session = init_ray(str(tmp_path), num_cpus=1)
    try:
        data = [{"i": i} for i in range(20)]
        assert ray.get(parallel_put(data, max_workers=3)) == data
        with pytest.raises(InvalidArgumentError, match="empty"):
            parallel_put([])
    finally:
        shutdown_ray(session)
