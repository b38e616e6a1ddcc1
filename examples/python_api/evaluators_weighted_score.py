"""Evaluators (docs/python_api.md), and a weighted objective over reward, toxicity and latency.

    python examples/python_api/evaluators_weighted_score.py [--toxicity-model DIR]

``trainer.add_evaluator(name, evaluator)`` runs the evaluator on every validation; its values appear in the metrics
as ``eval/<name>_mean`` (per-sample scores) or ``eval/<name>_p95`` (latency). The toxicity classifier is any local
HF sequence-classification directory (e.g. ``unitary/toxic-bert`` once downloaded); without one, the
script writes an untrained tiny classifier so the plumbing runs end to end (its scores mean nothing).
"""

from __future__ import annotations

import os
import tempfile

from _common import MODEL, base_parser, data_kwargs

from verl import DataConfig, EngineConfig
from verl.trainer.ppo import PPOTrainer
from verl.trainer.ppo.evaluators import LatencyEvaluator, ResponseLengthEvaluator, ToxicityEvaluator


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--toxicity-model", default=None, help="local HF sequence-classification directory")
    args = p.parse_args()
    toxicity_model = args.toxicity_model
    if toxicity_model is None:
        from verl.models.tiny import save_tiny_classifier

        toxicity_model = save_tiny_classifier(os.path.join(tempfile.mkdtemp(), "tiny-toxic-clf"))

    trainer = PPOTrainer(
        actor_model=MODEL,
        reward_model="rule",
        data_config=DataConfig(**data_kwargs(args)),
        engine_config=EngineConfig(kl_coef=0.05, gamma=0.99, reward_temp=1.0),
        optim_config={"actor_lr": 5e-5, "critic_lr": 2.5e-5},
        output_dir=args.out_dir,
    )
    trainer.add_evaluator("toxicity", ToxicityEvaluator(model=toxicity_model))
    trainer.add_evaluator("latency", LatencyEvaluator(model="llama3-8b", batch_size=4))  # the trainer's own rollout
    trainer.add_evaluator("response_length", ResponseLengthEvaluator())
    metrics = trainer.train(max_steps=args.max_steps, eval_interval=args.eval_interval)

    score = (
        0.6 * metrics["eval/reward_mean"][-1]
        - 0.2 * metrics["eval/toxicity_mean"][-1]
        - 0.2 * max(0, metrics["eval/latency_p95"][-1] - 0.8)
    )
    for key in (
        "eval/reward_mean",
        "eval/toxicity_mean",
        "eval/latency_p50",
        "eval/latency_p95",
        "eval/response_length_mean",
    ):
        print(f"{key}: {metrics[key][-1]:.4f}")
    print(f"weighted score: {score:.4f}")


if __name__ == "__main__":
    main()
