"""KL between the policy and the reference policy: per-token estimates from the sampled tokens' log-probs, the
KL-coefficient controllers (``algorithm.kl_ctrl``) and the KL-shaped reward (``algorithm.use_kl_in_reward``).

Shapes: ``(bs, response_length)`` tensors aligned with ``response_mask``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ._config import typed_section
from .functional import masked_mean

__all__ = [
    "KL_PENALTY_TYPES",
    "AdaptiveKLController",
    "FixedKLController",
    "apply_kl_penalty",
    "compute_rewards",
    "get_kl_controller",
    "kl_penalty",
    "kl_penalty_forward",
]

KL_PENALTY_TYPES = ("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3")


def _kl_estimate(logprob: torch.Tensor, ref_logprob: torch.Tensor, kind: str) -> torch.Tensor:
    if kind in ("kl", "k1"):
        return logprob - ref_logprob
    if kind == "abs":
        return (logprob - ref_logprob).abs()
    if kind in ("mse", "k2"):
        return 0.5 * (logprob - ref_logprob).square()
    if kind in ("low_var_kl", "k3"):
        log_ratio = torch.clamp(ref_logprob - logprob, min=-20.0, max=20.0)
        return torch.clamp(torch.exp(log_ratio) - log_ratio - 1, min=-10.0, max=10.0)
    if kind == "full":
        raise NotImplementedError(
            "kl_penalty='full' needs the whole vocabulary distribution of both policies, not the log-probs of the "
            f"sampled tokens; use one of {KL_PENALTY_TYPES}"
        )
    raise ValueError(f"Unknown kl_penalty {kind!r}. Choose one of {KL_PENALTY_TYPES} (or with a '+' suffix)")


def kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_penalty: str) -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from the sampled tokens' log-probs (Schulman 2020, "Approximating KL
    Divergence", http://joschu.net/blog/kl-approx.html). With log r = ref_logprob - logprob:

        "kl"  / "k1":          -log r = logprob - ref_logprob              (unbiased, high variance)
        "abs":                 |logprob - ref_logprob|
        "mse" / "k2":          0.5 * (logprob - ref_logprob)^2             (biased, low variance)
        "low_var_kl" / "k3":   r - log r - 1                               (unbiased, >= 0; log r clamped to
                                                                            [-20, 20], result to [-10, 10] as verl)

    A "+" suffix (e.g. "k3+") keeps the estimator's value but takes the gradient of k2, whose expected gradient is
    the true KL gradient (straight-through: k2 - sg(k2) + sg(value)). "full" raises NotImplementedError.

    Shapes: logprob, ref_logprob (bs, response_length) -> (bs, response_length).
    """
    return _kl_penalty(logprob, ref_logprob, kl_penalty)


def kl_penalty_forward(logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_penalty: str) -> torch.Tensor:
    """The value of one estimator of ``kl_penalty`` (no "+" suffix: no straight-through gradient), verl's name.

    Shapes: logprob, ref_logprob (bs, response_length) -> (bs, response_length).
    """
    return _kl_estimate(logprob, ref_logprob, kl_penalty)


def _kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, name: str) -> torch.Tensor:
    kind = name[:-1] if name.endswith("+") else name
    value = _kl_estimate(logprob, ref_logprob, kind)
    if not name.endswith("+") or kind in ("mse", "k2"):
        return value
    k2 = 0.5 * (logprob - ref_logprob).square()
    return k2 - k2.detach() + value.detach()


def compute_rewards(
    token_level_scores: torch.Tensor, old_log_prob: torch.Tensor, ref_log_prob: torch.Tensor, kl_ratio: float
) -> torch.Tensor:
    """KL-shaped reward with the k1 estimate and a fixed coefficient (verl's helper): r = score - beta (logp - ref).

    Unlike ``apply_kl_penalty`` it applies no mask and updates no controller. Shapes: (bs, response_length) in/out.
    """
    return token_level_scores - (old_log_prob - ref_log_prob) * kl_ratio


class AdaptiveKLController:
    """Adaptive KL coefficient (Ziegler et al. 2019, "Fine-Tuning Language Models from Human Preferences").

        e    = clip(KL_current / KL_target - 1, -0.2, 0.2)
        beta <- beta * (1 + e * n_steps / horizon)

    Selected by ``algorithm.kl_ctrl.type=adaptive``; ``value`` is the current beta.
    """

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: int) -> None:
        self.value = float(init_kl_coef)
        self.target = float(target_kl)
        self.horizon = horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        proportional_error = float(np.clip(current_kl / self.target - 1.0, -0.2, 0.2))
        self.value *= 1.0 + proportional_error * n_steps / self.horizon


class FixedKLController:
    """Constant KL coefficient; ``update`` is a no-op."""

    def __init__(self, kl_coef: float) -> None:
        self.value = float(kl_coef)

    def update(self, current_kl: float, n_steps: int) -> None:
        pass


def get_kl_controller(kl_ctrl: Any) -> FixedKLController | AdaptiveKLController:
    """Build the controller from the typed ``algorithm.kl_ctrl`` section (``KLControlConfig``): ``type`` (fixed |
    adaptive), ``kl_coef``, ``target_kl``, ``horizon``."""
    kl_ctrl = typed_section(kl_ctrl, "algorithm.kl_ctrl", "get_kl_controller")
    if kl_ctrl.type == "fixed":
        return FixedKLController(kl_coef=kl_ctrl.kl_coef)
    if kl_ctrl.type == "adaptive":
        if kl_ctrl.horizon <= 0:
            raise ValueError(f"kl_ctrl.horizon must be > 0 for the adaptive controller, got {kl_ctrl.horizon}")
        return AdaptiveKLController(init_kl_coef=kl_ctrl.kl_coef, target_kl=kl_ctrl.target_kl, horizon=kl_ctrl.horizon)
    raise ValueError(f"Unknown kl_ctrl.type {kl_ctrl.type!r}; choose 'fixed' or 'adaptive'")


def apply_kl_penalty(
    token_level_scores: torch.Tensor,
    old_log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    kl_ctrl: FixedKLController | AdaptiveKLController,
    kl_penalty: str = "kl",
) -> tuple[torch.Tensor, dict[str, float]]:
    """KL-shaped rewards (Ziegler et al. 2019; Ouyang et al. 2022, "InstructGPT"):

        r_t = score_t - beta * m_t * KL_t          (KL_t from ``kl_penalty``, beta = kl_ctrl.value)

    Then the controller is updated with the batch's mean per-sequence KL, mean_i(masked_mean_t(KL_{i,t})), and
    n_steps = bs (as verl). Metrics: ``actor/reward_kl_penalty`` (that mean KL) and ``actor/reward_kl_penalty_coeff``
    (the beta that was applied).

    Shapes: token_level_scores, old_log_prob, ref_log_prob, response_mask (bs, response_length)
    -> token_level_rewards (bs, response_length), metrics.
    """
    mask = response_mask.to(token_level_scores.dtype)
    kld = _kl_penalty(old_log_prob, ref_log_prob, kl_penalty) * mask
    beta = kl_ctrl.value
    token_level_rewards = token_level_scores - beta * kld
    current_kl = masked_mean(kld, mask, dim=-1).mean().item()
    kl_ctrl.update(current_kl=current_kl, n_steps=token_level_scores.shape[0])
    return token_level_rewards, {"actor/reward_kl_penalty": current_kl, "actor/reward_kl_penalty_coeff": beta}
