"""The algorithm core of PPO-family post-training: advantage estimators, policy / value / entropy losses, KL penalties
and controllers, loss aggregation.

Everything here is a pure function of tensors, plain numbers and typed config sections (below). No workers, no
models, no global state besides the two registries. Shapes: ``bs`` is the number of responses in the batch,
``response_length`` the padded length of the response part; every ``(bs, response_length)`` tensor is aligned with
``response_mask`` (1 on real response tokens, 0 on padding).

A leaf package: it imports torch, numpy and the standard library, nothing of ``verl`` (``tests/core_algos`` checks
it), so the trainer, the workers and ``verl.utils`` may all import it. One module per topic:

    functional               masked_mean / masked_sum / masked_var / masked_whiten, entropy_from_logits
    aggregation              agg_loss and the micro-batch / data-parallel loss weights
    advantage                advantage estimators and their registry (``algorithm.adv_estimator``)
    gdpo                     GDPO: reward components normalised separately
    optimal_token_baseline   the optimal token baseline (single- and multi-turn)
    policy_loss              the policy-loss registry (``actor.policy_loss.loss_mode``), token-level losses
    policy_loss_sequence     GSPO, GMPO (geo_mean), SAPO: sequence-level losses
    policy_loss_cov          Clip-Cov, KL-Cov
    policy_loss_dppo         DPPO (binary TV / binary KL trust regions)
    policy_loss_bypass       bypass mode: the sampler's log-probs as the old ones, corrected inside the loss
    kl                       KL estimates, KL controllers, the KL-shaped reward
    value_loss               value loss, entropy loss, DAPO's overlong penalty
    rollout_ratios           the sampler/trainer log ratio per token, its k1/k2/k3 divergences, per-row aggregates
    rollout_correction       importance weights and rejection against that mismatch (``algorithm.rollout_correction``)
    rollout_correction_metrics   the mismatch and correction metrics (``rollout_corr/*``, ``training/rollout_*``)
    trust_region             update-size control: the policy's drift from the sampling policy, the KL-adaptive
                             learning rate (``actor.trust_region``)

``verl.trainer.ppo.core_algos`` re-exports the same objects (same registries) under verl's old module path; the
rollout-correction modules are imported by name (verl's path for them is ``verl.trainer.ppo.rollout_corr_helper``).

Config: typed sections, converted once, above this package. A function that reads a config (the policy losses: the actor
section; GRPO pass@k, REINFORCE++ and GDPO: the ``algorithm`` section; ``get_kl_controller``: ``kl_ctrl``) reads its
attributes, with no default of its own: the defaults are the schema's (``verl.workers.config``,
``verl.trainer.config``). This package cannot import the schema (a higher layer), so it cannot turn a dict into a
section; it takes the worker's dataclass (a section of ``load_config``'s tree), a ``DictConfig`` built from the schema,
or any object with the attributes, and names the fix when handed a dict or None (`_config.typed_section`; the estimators
take None as "no config"). The conversion lives in the config layer, ``verl.utils.config.as_section``: the workers and
the controller hold typed configs already, and verl's path ``verl.trainer.ppo.core_algos`` wraps each public function
that reads a config so that ported code may keep passing a dict, an untyped ``DictConfig`` or None (the schema's
defaults); its look-ups by name return those. The registries hold this package's functions: the actor fetches a loss by
name here and calls it with its typed config, as verl's actor does.
"""

from .advantage import (
    ADV_ESTIMATOR_REGISTRY,
    AdvantageEstimator,
    AdvEstimatorFn,
    compute_gae_advantage_return,
    compute_gpg_outcome_advantage,
    compute_grpo_outcome_advantage,
    compute_grpo_passk_outcome_advantage,
    compute_grpo_vectorized_outcome_advantage,
    compute_opo_outcome_advantage,
    compute_reinforce_plus_plus_baseline_outcome_advantage,
    compute_reinforce_plus_plus_outcome_advantage,
    compute_remax_outcome_advantage,
    compute_rloo_outcome_advantage,
    compute_rloo_vectorized_outcome_advantage,
    get_adv_estimator_fn,
    register_adv_est,
)
from .aggregation import LOSS_AGG_MODES, agg_loss, loss_normalizer_counts, micro_batch_loss_weight
from .functional import entropy_from_logits, masked_mean, masked_sum, masked_var, masked_whiten
from .gdpo import compute_gdpo_outcome_advantage
from .kl import (
    KL_PENALTY_TYPES,
    AdaptiveKLController,
    FixedKLController,
    apply_kl_penalty,
    compute_rewards,
    get_kl_controller,
    kl_penalty,
    kl_penalty_forward,
)
from .optimal_token_baseline import (
    compute_multi_turn_optimal_token_baseline_advantage,
    compute_optimal_token_baseline_advantage,
)
from .policy_loss import (
    POLICY_LOSS_AGG_MODE,
    POLICY_LOSS_REGISTRY,
    PolicyLossFn,
    compute_policy_loss,
    compute_policy_loss_cispo,
    compute_policy_loss_dro,
    compute_policy_loss_gpg,
    compute_policy_loss_reinforce,
    compute_policy_loss_vanilla,
    effective_loss_agg_mode,
    get_policy_loss_fn,
    register_policy_loss,
    truncated_is_weights,
)
from .policy_loss_bypass import compute_policy_loss_bypass_mode
from .policy_loss_cov import compute_policy_loss_clip_cov, compute_policy_loss_kl_cov
from .policy_loss_dppo import compute_policy_loss_dppo_kl, compute_policy_loss_dppo_tv
from .policy_loss_sequence import compute_policy_loss_geo_mean, compute_policy_loss_gspo, compute_policy_loss_sapo
from .trust_region import adapt_lr_scale, policy_drift_kl_sum
from .value_loss import compute_entropy_loss, compute_overlong_penalty, compute_value_loss

__all__ = [
    "ADV_ESTIMATOR_REGISTRY",
    "KL_PENALTY_TYPES",
    "LOSS_AGG_MODES",
    "POLICY_LOSS_AGG_MODE",
    "POLICY_LOSS_REGISTRY",
    "AdaptiveKLController",
    "AdvEstimatorFn",
    "AdvantageEstimator",
    "FixedKLController",
    "PolicyLossFn",
    "agg_loss",
    "apply_kl_penalty",
    "compute_entropy_loss",
    "compute_gae_advantage_return",
    "compute_gdpo_outcome_advantage",
    "compute_gpg_outcome_advantage",
    "compute_grpo_outcome_advantage",
    "compute_grpo_passk_outcome_advantage",
    "compute_grpo_vectorized_outcome_advantage",
    "compute_multi_turn_optimal_token_baseline_advantage",
    "compute_opo_outcome_advantage",
    "compute_optimal_token_baseline_advantage",
    "compute_overlong_penalty",
    "compute_policy_loss",
    "compute_policy_loss_bypass_mode",
    "compute_policy_loss_cispo",
    "compute_policy_loss_clip_cov",
    "compute_policy_loss_dppo_kl",
    "compute_policy_loss_dppo_tv",
    "compute_policy_loss_dro",
    "compute_policy_loss_geo_mean",
    "compute_policy_loss_gpg",
    "compute_policy_loss_gspo",
    "compute_policy_loss_kl_cov",
    "compute_policy_loss_reinforce",
    "compute_policy_loss_sapo",
    "compute_policy_loss_vanilla",
    "compute_reinforce_plus_plus_baseline_outcome_advantage",
    "compute_reinforce_plus_plus_outcome_advantage",
    "compute_remax_outcome_advantage",
    "compute_rewards",
    "compute_rloo_outcome_advantage",
    "compute_rloo_vectorized_outcome_advantage",
    "compute_value_loss",
    "effective_loss_agg_mode",
    "entropy_from_logits",
    "get_adv_estimator_fn",
    "get_kl_controller",
    "get_policy_loss_fn",
    "kl_penalty",
    "kl_penalty_forward",
    "loss_normalizer_counts",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "micro_batch_loss_weight",
    "register_adv_est",
    "register_policy_loss",
    "truncated_is_weights",
    "adapt_lr_scale",
    "policy_drift_kl_sum",
]
