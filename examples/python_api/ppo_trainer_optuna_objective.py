"""A whole PPO run as an objective function of its hyperparameters (docs/python_api.md, hyperparameter search).

    python examples/python_api/ppo_trainer_optuna_objective.py                 # one run at the starting values
    python examples/python_api/ppo_trainer_optuna_objective.py --optuna-trials 4   # a real Optuna study (if installed)

``objective(params)`` builds a ``PPOTrainer`` from five hyperparameters, trains ``--max-steps`` steps
and returns the last ``eval/reward_mean`` (held-out mean score). ``PPOTrainer`` is a thin layer over the ``main_ppo``
controller: ``trainer.config`` is the ``ppo_trainer`` config tree the arguments map onto (docs/python_api.md).
"""

from __future__ import annotations

import argparse

from _common import MODEL, base_parser, data_kwargs

from verl import DataConfig, EngineConfig, Trainer  # noqa: F401  (Trainer is the base class)
from verl.trainer.ppo import PPOTrainer

# Starting values; on a small budget fix reward_temp=1.0 and gamma=0.99 first, tune kl_coef and actor_lr.
TIP_PARAMS = {"kl_coef": 0.05, "gamma": 0.99, "num_rollout_steps": 16, "actor_lr": 5e-5, "reward_temp": 1.0}


def objective(params: dict, args: argparse.Namespace) -> float:
    """Train with ``params`` (kl_coef, gamma, num_rollout_steps, actor_lr, reward_temp); return the last
    validation reward mean."""
    trainer = PPOTrainer(
        actor_model=args.actor_model,  # a local HF causal-LM directory (e.g. a Llama-3-8B chat copy)
        reward_model=args.reward_model,  # a scorer name or a local reward-model directory
        data_config=DataConfig(**{**data_kwargs(args), "num_rollout_steps": params["num_rollout_steps"]}),
        engine_config=EngineConfig(kl_coef=params["kl_coef"], gamma=params["gamma"], reward_temp=params["reward_temp"]),
        optim_config={
            "actor_lr": params["actor_lr"],
            "critic_lr": params["actor_lr"] * 0.5,  # critic lr at half the actor's
        },
        output_dir=args.out_dir,
    )
    metrics = trainer.train(max_steps=args.max_steps, eval_interval=args.eval_interval)
    return metrics["eval/reward_mean"][-1]


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--actor-model", default=MODEL)
    p.add_argument("--reward-model", default="rule", help="a scorer name, or a local reward-model directory")
    p.add_argument("--optuna-trials", type=int, default=0, help="run an Optuna study of N trials (needs optuna)")
    args = p.parse_args()
    if args.optuna_trials:
        import optuna

        def trial_objective(trial: optuna.Trial) -> float:
            params = {
                "kl_coef": trial.suggest_float("kl_coef", 0.01, 0.2),
                "gamma": trial.suggest_float("gamma", 0.9, 0.999),
                "num_rollout_steps": trial.suggest_int("num_rollout_steps", 16, 128),
                "actor_lr": trial.suggest_float("actor_lr", 1e-6, 5e-5, log=True),
                "reward_temp": trial.suggest_float("reward_temp", 0.5, 2.0),
            }
            return objective(params, argparse.Namespace(**{**vars(args), "out_dir": None}))

        study = optuna.create_study(direction="maximize")
        study.optimize(trial_objective, n_trials=args.optuna_trials)
        print("Best trial:", study.best_trial.params)
        return
    params = {**TIP_PARAMS, "num_rollout_steps": args.num_rollout_steps}
    value = objective(params, args)
    print(f"objective({params}) = eval/reward_mean {value:.4f}")


if __name__ == "__main__":
    main()
