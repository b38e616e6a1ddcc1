"""Step metrics under verl's names: token counts per stage and throughput from the batch."""

import torch

from verl.protocol import DataProto
from verl.trainer.ppo.metric_utils import (
    compute_throughout_metrics,
    compute_throughput_metrics,
    compute_timing_metrics,
)


def _batch():
    # 2 rows: prompts of 2 and 3 real tokens, responses of 3 and 1 generated tokens (width 3)
    mask = torch.tensor([[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    return DataProto.from_dict({"responses": torch.zeros(2, 3, dtype=torch.long), "attention_mask": mask})


def test_timing_per_token_counts_generated_tokens_for_gen_and_all_tokens_for_the_rest():
    m = compute_timing_metrics(_batch(), {"gen": 0.4, "update_actor": 0.9, "step": 2.0})
    assert m["timing_s/step"] == 2.0 and "timing_per_token_ms/step" not in m
    assert m["timing_per_token_ms/gen"] == 1000 * 0.4 / 4  # 3 + 1 generated tokens
    assert m["timing_per_token_ms/update_actor"] == 1000 * 0.9 / 9  # 5 prompt + 4 response tokens


def test_throughput_counts_real_tokens_or_verls_global_token_num():
    batch = _batch()
    m = compute_throughput_metrics(batch, {"step": 3.0}, n_gpus=3)
    assert m == {"perf/total_num_tokens": 9, "perf/time_per_step": 3.0, "perf/throughput": 1.0}
    batch.meta_info["global_token_num"] = [4, 5]
    assert compute_throughout_metrics is compute_throughput_metrics
    assert compute_throughout_metrics(batch, {"step": 3.0}, n_gpus=3)["perf/total_num_tokens"] == 9
