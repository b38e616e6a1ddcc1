"""Step callbacks on the hybrid engine (docs/python_api.md) -- a per-token KL filter, a dynamic gamma
scheduler and reward-aware early stopping.

    python examples/python_api/step_callbacks.py

Each step's intermediate products (log-probs, reference log-probs, per-token KL, values, rewards, advantages) reach
the callbacks registered with ``trainer.engine.step(...)`` or ``trainer.add_callback(...)``; they may change them
(the KL filter takes tokens out of the loss) or the schedule (gamma, stopping).
"""

from __future__ import annotations

from _common import MODEL, base_parser, data_kwargs

from verl import DataConfig, EngineConfig
from verl.engine import DynamicGammaScheduler, KLFilterCallback, RewardAwareEarlyStopping
from verl.trainer.ppo import PPOTrainer


def main() -> None:
    p = base_parser(__doc__.splitlines()[0], eval_interval=2)
    args = p.parse_args()
    trainer = PPOTrainer(
        actor_model=MODEL,
        reward_model="rule",
        data_config=DataConfig(**data_kwargs(args)),
        engine_config=EngineConfig(kl_coef=0.05, gamma=0.99),
        optim_config={"actor_lr": 5e-5, "critic_lr": 2.5e-5},
        output_dir=args.out_dir,
    )
    # drop tokens whose KL to the reference exceeds 0.5 from the loss (the reference policy is switched on for it)
    trainer.engine.step(KLFilterCallback(threshold=0.5))
    # lower gamma to 0.9 while the step's reward variance is above 0.2
    trainer.engine.step(DynamicGammaScheduler(high_var=0.2, low_gamma=0.9, base_gamma=0.99))
    # stop when eval/reward_std < 0.05 for 3 evaluations in a row
    trainer.add_callback(RewardAwareEarlyStopping(threshold=0.05, patience=3))

    @trainer.engine.step
    def kl_max(ctrl, batch, metrics):  # any function works too: it sees the step's batch before the updates
        metrics["callbacks/kl_max"] = float(batch.batch["token_level_kl"].max())

    metrics = trainer.train(max_steps=args.max_steps, eval_interval=args.eval_interval)
    for step, frac, gamma, kl in zip(
        metrics.steps["callbacks/gamma"],
        metrics["callbacks/kl_filtered_frac"],
        metrics["callbacks/gamma"],
        metrics["callbacks/kl_max"],
    ):
        print(f"step {step}: kl_filtered_frac={frac:.4f} gamma={gamma:.3f} kl_max={kl:.4f}")
    print(f"eval/reward_std: {[round(v, 4) for v in metrics['eval/reward_std']]}")
    print(f"stopped early: {metrics.stop_reason or 'no'}")


if __name__ == "__main__":
    main()
