"""DAPO's dynamic sampling (Yu et al., 2025): keep only prompt groups whose rewards differ, and sample more prompts
until the batch holds ``data.train_batch_size`` of them. A group whose n responses all scored the same has zero
advantage under group-normalised estimators: it costs compute and carries no signal."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np
import torch

from verl.protocol import DataProto


def filter_groups(batch: DataProto, metric: str, n: int) -> tuple[DataProto, int]:
    """The rows of prompt groups whose ``metric`` varies (``seq_reward``/``seq_final_reward``: the summed score, else
    a reward extra field), and how many groups that is."""
    if metric in ("seq_reward", "seq_final_reward"):
        values = batch.batch["token_level_scores"].sum(-1).tolist()
    elif metric in batch.non_tensor_batch:
        values = [float(v) for v in batch.non_tensor_batch[metric]]
    else:
        raise KeyError(f"algorithm.filter_groups.metric={metric!r} is neither seq_reward nor a reward extra field")
    by_uid: dict[str, list[float]] = defaultdict(list)
    for uid, v in zip(batch.non_tensor_batch["uid"], values):
        by_uid[uid].append(v)
    keep_uids = {u for u, vs in by_uid.items() if np.std(vs) > 0 or len(vs) == 1}
    mask = np.array([u in keep_uids for u in batch.non_tensor_batch["uid"]])
    return batch[torch.from_numpy(mask)], len(keep_uids)


def whole_groups_for_workers(num_groups: int, n: int, world_size: int) -> int:
    """The most whole groups of ``n`` rows, at most ``num_groups``, whose rows split evenly over ``world_size``."""
    groups = num_groups
    while groups > 0 and (groups * n) % world_size:
        groups -= 1
    return groups


def concat_filling_extras(parts: list[DataProto]) -> DataProto:
    """``DataProto.concat`` of generation batches whose reward extra columns may differ (a column a scorer never
    returned in one batch): the missing entries become NaN instead of failing the step, and
    ``meta_info["reward_extra_keys"]`` lists the columns of every batch."""
    parts = [p for p in parts if len(p)]
    keys = dict.fromkeys(k for p in parts for k in p.non_tensor_batch)
    extra_keys = list(dict.fromkeys(k for p in parts for k in p.meta_info.get("reward_extra_keys", [])))
    for p in parts:
        for k in keys:
            if k not in p.non_tensor_batch:
                p.non_tensor_batch[k] = np.full(len(p), np.nan, dtype=object)
        if "reward_extra_keys" in p.meta_info:
            p.meta_info["reward_extra_keys"] = extra_keys
    return DataProto.concat(parts)


def sample_varied_groups(
    sample_round: Callable[[], DataProto], metric: str, n: int, target: int, max_rounds: int, world_size: int
) -> tuple[DataProto, dict[str, float]]:
    """Call ``sample_round`` (generate + score ``rollout.n`` responses for a new batch of prompts) until ``target``
    varied groups are kept or ``max_rounds`` rounds ran (0: no limit). Returns the batch (``target`` groups, or as
    many whole groups as split evenly over ``world_size`` data-parallel workers) and the round counts."""
    kept: list[DataProto] = []
    num_groups, rounds = 0, 0
    while True:
        rounds += 1
        batch, groups = filter_groups(sample_round(), metric, n)
        kept.append(batch)
        num_groups += groups
        if num_groups >= target or (max_rounds > 0 and rounds >= max_rounds):
            break
    metrics = {"train/num_gen_batches": rounds, "train/num_kept_groups": num_groups}
    if num_groups >= target:
        return concat_filling_extras(kept)[: target * n], metrics
    whole = whole_groups_for_workers(num_groups, n, world_size)
    if whole == 0:
        raise RuntimeError(
            f"dynamic sampling kept {num_groups} groups in {rounds} generation batches (every other group's rewards "
            f"were equal), too few to train on {world_size} data-parallel workers. Raise "
            "algorithm.filter_groups.max_num_gen_batches or disable filter_groups."
        )
    return concat_filling_extras(kept)[: whole * n], metrics
