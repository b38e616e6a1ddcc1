"""Small torch helpers shared by the trainers: seeding, learning-rate schedules, masked statistics, log-probs.

The masked statistics and ``entropy_from_logits`` are defined in the leaf package :mod:`verl.core_algos`
(``verl.core_algos.functional``) and re-exported here under the same names."""

from __future__ import annotations

import math
import os
import random

import numpy as np
import torch

from verl.core_algos.functional import (  # noqa: F401 (re-exported)
    entropy_from_logits,
    masked_mean,
    masked_sum,
    masked_var,
    masked_whiten,
)


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch. With the same seed, CPU runs give identical results."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def enable_deterministic() -> None:
    """torch's deterministic algorithms from now on in this process (``trainer.deterministic``): cuBLAS with a
    fixed workspace (``CUBLAS_WORKSPACE_CONFIG``, read when CUDA starts: set it before any CUDA call), cuDNN without
    autotuning, and an error naming any op that has no deterministic implementation."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def get_cosine_schedule_with_warmup(
    optimizer: torch.optim.Optimizer,
    num_warmup_steps: int,
    num_training_steps: int,
    min_lr_ratio: float = 0.0,
    num_cycles: float = 0.5,
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup from 0 to lr over ``num_warmup_steps``, then cosine decay to ``lr * min_lr_ratio``.

    factor(t) = (t + 1) / (W + 1)                                              for t < W  (step 0 already moves)
              = min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + cos(2 pi c p))  with p = (t - W) / (T - W), c = 0.5
    """
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must be in [0, 1], got {min_lr_ratio}")

    def factor(step: int) -> float:
        if step < num_warmup_steps:
            return float(step + 1) / float(max(1, num_warmup_steps + 1))
        progress = float(step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        cosine = 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * min(progress, 1.0)))
        return min_lr_ratio + (1.0 - min_lr_ratio) * cosine

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def get_constant_schedule_with_warmup(
    optimizer: torch.optim.Optimizer, num_warmup_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warmup over ``num_warmup_steps`` (factor (t + 1) / (W + 1), so step 0 already moves), then the
    constant lr."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, float(step + 1) / float(max(1, num_warmup_steps + 1)))
    )


def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[labels]: logits (bs, L, V), labels (bs, L) -> (bs, L), computed in float32."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def logprobs_and_entropy_from_logits(
    logits: torch.Tensor, labels: torch.Tensor, calculate_entropy: bool = True, entropy_grad: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`logprobs_from_logits` and `entropy_from_logits` from one ``log_softmax`` (float32): one pass over the
    vocabulary instead of three. H = -sum_v p_v log p_v with p = exp(log p). Shapes (..., V), (...) -> (...), (...).
    ``entropy_grad=False`` computes the entropy outside the autograd graph (a metric only: no saved activations)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    token_logp = logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    if not calculate_entropy:
        return token_logp, None
    if entropy_grad:
        return token_logp, -(logp.exp() * logp).sum(dim=-1)
    with torch.no_grad():
        return token_logp, -(logp.exp() * logp).sum(dim=-1)


def get_response_mask(response_id: torch.Tensor, eos_token: int | list[int] = 2, dtype=torch.int64) -> torch.Tensor:
    """1 on every response token up to and including the first end-of-sequence token (any of ``eos_token``), 0 after.

    response_id (bs, R) -> (bs, R) of ``dtype``. mask[i, t] = 1 iff no eos occurs in response_id[i, :t]."""
    eos = torch.isin(response_id, torch.as_tensor(eos_token, device=response_id.device)).int()
    return ((eos.cumsum(dim=1) - eos) == 0).to(dtype)


def pad_2d_list_to_length(response: list[list], pad_token_id, max_length: int | None = None) -> torch.Tensor:
    """Rows of different lengths (token ids, log-probs) as one (bs, L) tensor, right-padded with ``pad_token_id``;
    L is the longest row, or ``max_length`` when that is longer."""
    longest = max(len(row) for row in response)
    width = max(longest, max_length or 0)
    return torch.tensor([list(row) + [pad_token_id] * (width - len(row)) for row in response])


def pad_sequence_to_length(
    tensors: torch.Tensor, max_seq_len: int, pad_token_id, left_pad: bool = False
) -> torch.Tensor:
    """``tensors`` (bs, L) padded along the last dim to ``max_seq_len`` with ``pad_token_id`` (on the left when
    ``left_pad``); returned unchanged when already that long or longer."""
    missing = max_seq_len - tensors.shape[-1]
    if missing <= 0:
        return tensors
    return torch.nn.functional.pad(tensors, (missing, 0) if left_pad else (0, missing), value=pad_token_id)


def distributed_masked_mean(local_tensor: torch.Tensor, local_mask: torch.Tensor) -> torch.Tensor:
    """mean of ``local_tensor`` where ``local_mask`` is 1, over all ranks of the default process group:
    sum_r sum(x_r * m_r) / sum_r sum(m_r). Every rank gets the same scalar."""
    import torch.distributed as dist

    total = (local_tensor * local_mask).sum()
    count = local_mask.sum().to(total.dtype)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    dist.all_reduce(count, op=dist.ReduceOp.SUM)
    return total / count


def distributed_mean_max_min_std(
    local_tensor: torch.Tensor, compute_max: bool = True, compute_min: bool = True, compute_std: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """(mean, max, min, std) of all elements of ``local_tensor`` over all ranks of the default process group; a
    statistic not asked for is None. std is the sample std: sqrt(sum (x - mean)^2 / (N - 1)), N all elements."""
    import torch.distributed as dist

    total = local_tensor.sum()
    count = torch.tensor(float(local_tensor.numel()), device=local_tensor.device, dtype=total.dtype)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    dist.all_reduce(count, op=dist.ReduceOp.SUM)
    mean = total / count
    gmax = gmin = std = None
    if compute_max:
        gmax = local_tensor.max().clone()
        dist.all_reduce(gmax, op=dist.ReduceOp.MAX)
    if compute_min:
        gmin = local_tensor.min().clone()
        dist.all_reduce(gmin, op=dist.ReduceOp.MIN)
    if compute_std:
        squares = ((local_tensor - mean) ** 2).sum()
        dist.all_reduce(squares, op=dist.ReduceOp.SUM)
        std = torch.sqrt(squares / (count - 1))
    return mean, gmax, gmin, std


def expand_as_nested(tensor: torch.Tensor, nested_tensor: torch.Tensor) -> torch.Tensor:
    """A jagged nested tensor shaped like ``nested_tensor`` (bs, j) whose row i repeats ``tensor[i]``: a per-sample
    value (bs,) spread over each sample's tokens."""
    from verl.utils.errors import InvalidArgumentError

    if not getattr(nested_tensor, "is_nested", False):
        raise InvalidArgumentError("expand_as_nested: nested_tensor must be a (jagged) nested tensor")
    if tensor.dim() != 1:
        raise InvalidArgumentError(f"expand_as_nested: tensor must be 1-D (bs,), got shape {tuple(tensor.shape)}")
    if nested_tensor.dim() != 2:
        raise InvalidArgumentError(f"expand_as_nested: nested_tensor must be 2-D (bs, j), got {nested_tensor.dim()}-D")
    if tensor.shape[0] != nested_tensor.shape[0]:
        raise InvalidArgumentError(
            f"expand_as_nested: {tensor.shape[0]} values for a nested tensor of {nested_tensor.shape[0]} rows"
        )
    offsets = nested_tensor.offsets()
    values = torch.repeat_interleave(tensor, offsets.diff(), dim=0)
    return torch.nested.nested_tensor_from_jagged(values=values, offsets=offsets)


LOGPROB_CHUNK_ELEMENTS = 2**23  # float32 elements of one chunk of the vocabulary-wide work (32 MiB): ~55 rows at 152k


def logprob_chunk_rows(vocab_size: int) -> int:
    """Rows per chunk of `ChunkedLogProbEntropy`: ``LOGPROB_CHUNK_ELEMENTS / V``, at least 1."""
    return max(1, LOGPROB_CHUNK_ELEMENTS // max(vocab_size, 1))


class ChunkedLogProbEntropy(torch.autograd.Function):
    """Token log-probs and entropies of ``logits`` (T, V) computed ``chunk`` rows at a time, without keeping any
    (T, V) float32 tensor: the backward recomputes each chunk's softmax from the saved logits.

    Forward, per row with L = logsumexp(z):  log p_y = z_y - L,  H = L - sum_v p_v z_v.
    Backward:  d log p_y / dz = onehot(y) - p,   dH / dz = -p * (log p + H).

    Memory beyond the logits themselves: their gradient (the logits' dtype) and ~4 float32 (chunk, V) tensors,
    against four (T, V) float32 tensors for `logprobs_and_entropy_from_logits` (the flat copy, the log-softmax and
    two entropy temporaries, or the gradients in the backward). Values equal the log-softmax path's to float
    rounding; the same inputs give the same bits (each row's reductions run in one fixed order)."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, chunk: int, want_entropy: bool):
        n = logits.shape[0]
        logp = torch.empty(n, dtype=torch.float32, device=logits.device)
        entropy = torch.empty(n if want_entropy else 0, dtype=torch.float32, device=logits.device)
        for i in range(0, n, chunk):
            z = logits[i : i + chunk].float()
            lse = torch.logsumexp(z, dim=-1)
            logp[i : i + chunk] = z.gather(-1, labels[i : i + chunk].unsqueeze(-1)).squeeze(-1) - lse
            if want_entropy:
                entropy[i : i + chunk] = lse - (torch.softmax(z, dim=-1) * z).sum(-1)
        ctx.save_for_backward(logits, labels, entropy)
        ctx.chunk, ctx.want_entropy = chunk, want_entropy
        return logp, entropy

    @staticmethod
    def backward(ctx, grad_logp: torch.Tensor, grad_entropy: torch.Tensor):
        logits, labels, entropy = ctx.saved_tensors
        grad = torch.empty_like(logits)
        for i in range(0, logits.shape[0], ctx.chunk):
            z = logits[i : i + ctx.chunk].float()
            log_p = torch.log_softmax(z, dim=-1)
            p = log_p.exp()
            g_lp = grad_logp[i : i + ctx.chunk].unsqueeze(-1) if grad_logp is not None else None
            g = torch.zeros_like(z) if g_lp is None else -p * g_lp
            if g_lp is not None:
                g.scatter_add_(-1, labels[i : i + ctx.chunk].unsqueeze(-1), g_lp)
            if ctx.want_entropy and grad_entropy is not None and grad_entropy.numel():
                h = entropy[i : i + ctx.chunk].unsqueeze(-1)
                g -= grad_entropy[i : i + ctx.chunk].unsqueeze(-1) * p * (log_p + h)
            grad[i : i + ctx.chunk] = g.to(grad.dtype)
        return grad, None, None, None


def chunked_logprobs_and_entropy(
    logits: torch.Tensor,
    labels: torch.Tensor,
    calculate_entropy: bool = True,
    entropy_grad: bool = True,
    chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`logprobs_and_entropy_from_logits` for flat logits (T, V) at a fraction of the memory (`ChunkedLogProbEntropy`;
    ``actor.entropy_from_logits_with_chunking``), ``chunk`` rows at a time (default `logprob_chunk_rows`). Other
    shapes are flattened and restored."""
    shape = labels.shape
    flat, flat_labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    chunk = chunk or logprob_chunk_rows(logits.shape[-1])
    if not calculate_entropy:
        logp, _ = ChunkedLogProbEntropy.apply(flat, flat_labels, chunk, False)
        return logp.reshape(shape), None
    if entropy_grad:
        logp, entropy = ChunkedLogProbEntropy.apply(flat, flat_labels, chunk, True)
        return logp.reshape(shape), entropy.reshape(shape)
    logp, _ = ChunkedLogProbEntropy.apply(flat, flat_labels, chunk, False)
    with torch.no_grad():
        _, entropy = ChunkedLogProbEntropy.apply(flat.detach(), flat_labels, chunk, True)
    return logp.reshape(shape), entropy.reshape(shape)
