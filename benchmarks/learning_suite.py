"""Learning suite: do the default settings learn on tasks they were never tuned on, and against TRL's GRPOTrainer?

    python benchmarks/learning_suite.py --jobs 2 --threads 1     # every task, 3 seeds each side (~1 h on 2 cores,
                                                                 # plus ~1 h of SFT warm starts the first time)
    python benchmarks/learning_suite.py --tasks sub2-30,mul1-30 --seeds 1  # a subset
    python benchmarks/learning_suite.py --sides ours --variant lr1e-5:actor_rollout_ref.actor.optim.lr=1e-5
    python benchmarks/learning_suite.py --smoke                  # CI: one short task, one seed, both sides
    python benchmarks/learning_suite.py --report-only            # rebuild the table and the PNG from saved runs
    python benchmarks/learning_suite.py --tune 8 --tasks sub2-30,mul1-30,countdown-10   # verl tune over the trust region
    python benchmarks/learning_suite.py --quick-start --seeds 1,2,3   # the default main job over seeds

Each task differs from the built-in default (2-digit addition from the shipped warm start) the way users' tasks
differ: the operation and its length (subtraction, three-term sums, multiplication by one digit, countdown), the
reward (exact match or digit-level partial credit), the response length (an answer alone, ~8 tokens, to worked
steps, ~35), the warm start's held-out accuracy (about 10, 30, 55 and 75%) and the model (the default tiny Qwen2,
hidden 128 / 2 layers; hidden 256 / 4 layers on two tasks; hidden 384 / 6 layers on one).

Warm starts: the SFT trainer (``verl.trainer.main_sft``) on the task's own generated reference responses, from a
fresh tiny model, a checkpoint every few steps; the checkpoint whose greedy accuracy on the test split's first 200
problems (the selection rows) is closest to the task's target is the warm start (cached under
``--work-dir/warmstarts``; nothing is shipped). Its baseline is then measured on the next 400 problems, the held-out
rows every run is scored on: a checkpoint picked on the rows it is scored on starts from a lucky score (the pick
is a maximum of noisy evaluations, 6.0% where its neighbours scored 2-5% on sub2-large), and every run from it
then seems to lose ground by regression to the mean. SFT's path depends on the CPU's kernels and the thread count, so
a warm start made on another machine may miss its target: the suite then says so in one WARNING line and marks it in
the table. A warm start is made again, and the task's runs are moved aside, when the task's SFT recipe changes.

Runs: each (side, task, seed) is a subprocess with the same thread count, training for a fixed budget of training
wall-clock seconds (``--budget-s``; evaluation time is not counted), with a greedy held-out evaluation of the live
policy at 0, 1/4, 1/2, 3/4 and all of the budget (the first step boundary past each point), by one function for both
sides (`verl.utils.evaluation.evaluate_greedy_accuracy`: exact-match accuracy on the task's 400 held-out
problems, disjoint from training and from the selection rows by problem). A run's end is the mean of its last two evaluations (one greedy evaluation
moves by several points); its gain is end - warm start.

- ours: ``python -m verl.trainer.main_ppo``'s default config (``main_ppo`` builds the same trainer) with only the
  task's model, data and lengths set, driven step by step through the Python API (``build_trainer``,
  ``train_step``). ``--variant NAME:key=value,...`` adds configurations of ours.
- TRL: ``GRPOTrainer`` with the same batch per generation (64 prompts x 8 samples, four optimizer steps of 16
  prompts each, as ours), TRL's default sampling (temperature 1, full vocabulary; ours samples at 0.5, its
  default; ``--trl-temperature`` changes TRL's, in a separate ``--work-dir``), TRL's loss defaults (``dapo``
  token-level loss, epsilon 0.2, beta 0, group-scaled rewards), fp32 and no gradient checkpointing (faster here), a
  constant learning rate: the best of ``--trl-lrs`` by the gain of seed 1 on that task (chosen once per task; that
  run is its seed 1).

Each run's JSON is kept under ``--work-dir/runs``; an interrupted suite resumes where it stopped. Output: a Markdown
section (per task: warm start, each side's end and gain with mean and standard deviation over seeds, the acceptance
checks FLOOR_POINTS and MARGIN_POINTS) printed and, with ``--write-docs``, put into docs/results.md, and a PNG of
held-out accuracy against training time (mean per side, min-max band over seeds).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (ROOT, os.path.join(ROOT, "benchmarks")):  # verl, and rl_curves' report helpers
    if _path not in sys.path:
        sys.path.insert(0, _path)

SECTION = "## Learning suite: the defaults on tasks they were never tuned on"
SMALL = "builtin://tiny-qwen2?hidden_size=128&num_layers=2&seed=0"
LARGE = "builtin://tiny-qwen2?hidden_size=256&num_layers=4&seed=0"
XL = "builtin://tiny-qwen2?hidden_size=384&num_layers=6&seed=0"
SELECTION_SIZE = 200  # the warm start is chosen on the test split's first rows ...
HELD_OUT_SIZE = 400  # ... and every run is scored on the next ones: choosing and scoring on one set biases the gains
EVAL_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)
TRL_LRS = (2e-5, 6e-5, 2e-4)
TRL_STEPS_PER_GENERATION = 4  # generation_batch_size / per_device_train_batch_size in child_trl
TARGET_TOLERANCE = 0.10  # a warm start further than this (or half its target) from it is reported as missing it
FLOOR_POINTS = 2.0  # acceptance: no task and seed ends more than this below its warm start
MARGIN_POINTS = 10.0  # acceptance: our mean gain at least TRL's best-learning-rate gain + this


@dataclasses.dataclass(frozen=True)
class SuiteTask:
    """One task: a built-in generator's options, the warm start's target accuracy, the model, the lengths."""

    name: str
    task: str  # built-in task (verl.data.tasks)
    options: str  # its options as a builtin:// query string
    target: float  # warm start's held-out accuracy to aim for
    model: str = SMALL
    response_length: int = 32
    prompt_length: int = 64  # data.max_prompt_length (the chat template's tokens included)
    sft_steps: int = 800  # SFT schedule length (cosine); checkpoints every sft_every steps
    sft_every: int = 20
    sft_lr: float | None = None  # SFT's peak rate (None: the SFT trainer's default, tuned on the small model)
    budget_factor: float = 1.0  # the run's budget is --budget-s times this (a larger model's step takes longer)
    what: str = ""
    shipped: str = ""  # a shipped warm start instead of one made by SFT (the built-in default task)

    def files(self) -> tuple[str, str]:
        query = f"&{self.options}" if self.options else ""
        return (
            f"builtin://{self.task}/train?size=4000{query}",
            f"builtin://{self.task}/test?size={SELECTION_SIZE + HELD_OUT_SIZE}{query}",
        )


REFERENCE = SuiteTask(
    "default-add2",
    "arithmetic",
    "",
    0.30,
    shipped="builtin://tiny-qwen2-arith-sft",
    what="the built-in default (the defaults were tuned on it), for reference",
)
TASKS = (
    SuiteTask("sub2-30", "arithmetic", "ops=-", 0.30, what="2-digit subtraction (negative results), exact"),
    SuiteTask(
        "mul1-30",
        "arithmetic",
        "min_digits=2&max_digits=3&ops=*&mul_digits=1",
        0.30,
        sft_steps=1000,
        what="2-3-digit x 1-digit products, exact",
    ),
    SuiteTask(
        "countdown-10",
        "countdown",
        "num_numbers=3&max_number=15&max_target=50",
        0.10,
        response_length=40,
        prompt_length=96,
        sft_steps=1000,
        what="countdown, 3 numbers (1-15) to a target <= 50 (any valid expression), exact",
    ),
    SuiteTask(
        "add3-partial-10",
        "arithmetic",
        "min_digits=3&max_digits=3&reward=partial",
        0.10,
        sft_steps=1000,
        sft_lr=1e-3,  # at 3e-3 its sharp rise (0% -> 60% within 200 steps) came past the 1000 steps on one machine
        what="3-digit sums, digit-level partial credit",
    ),
    SuiteTask(
        "add2-answer-75",
        "arithmetic",
        "style=answer",
        0.75,
        response_length=12,
        what="2-digit sums, the answer alone (~8 tokens), exact",
    ),
    SuiteTask(
        "sum3-steps-30",
        "arithmetic",
        "terms=3&style=steps",
        0.30,
        response_length=48,
        sft_steps=1200,
        what="three-term sums written as partial results (~35 tokens), exact",
    ),
    SuiteTask(
        "sub2-large",
        "arithmetic",
        "ops=-",
        0.55,
        model=LARGE,
        budget_factor=2.0,
        sft_steps=800,
        sft_lr=1e-3,  # at the default 3e-3 this width stalls near 5% for 600 steps (3.2% and 6.8% on two machines)
        what="2-digit subtraction, hidden 256 / 4 layers (4.6x the parameters)",
    ),
    SuiteTask(
        "sum3-large",
        "arithmetic",
        "terms=3",
        0.55,
        model=LARGE,
        budget_factor=2.0,
        sft_steps=1600,
        sft_lr=1e-3,  # the small model's SFT on three-term sums reached 64% on one machine and 9-47% on another
        what="three-term 2-digit sums, hidden 256 / 4 layers, exact",
    ),
    SuiteTask(
        "sub2-xl",
        "arithmetic",
        "ops=-",
        0.55,
        model=XL,
        budget_factor=2.5,
        sft_steps=1000,
        sft_lr=5e-4,  # 62% at step 800 in a probe (1e-3 suited hidden 256, 3e-3 hidden 128)
        what="2-digit subtraction, hidden 384 / 6 layers (12x the small model's parameters)",
    ),
)
SMOKE_TASK = "add2-answer-75"


def get_tasks(names: str | None) -> list[SuiteTask]:
    by_name = {t.name: t for t in (*TASKS, REFERENCE)}
    if not names:
        return list(TASKS)
    unknown = [n for n in names.split(",") if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown task(s) {unknown}; the suite's tasks: {sorted(by_name)}")
    return [by_name[n] for n in names.split(",")]


# --------------------------------------------------------------------------------------------------- evaluation
def _split_rows(task: SuiteTask, split: int) -> list:
    from verl.data.tasks import resolve_data_files
    from verl.utils.dataset.parquet import read_parquet_rows

    return read_parquet_rows([resolve_data_files(task.files()[split])])


def _test_rows(task: SuiteTask) -> list:
    return _split_rows(task, 1)


def train_rows(task: SuiteTask) -> list:
    """The task's training prompts: RL samples from them, and the warm start's SFT was fitted on them."""
    return _split_rows(task, 0)


def selection_rows(task: SuiteTask) -> list:
    """The test split's first SELECTION_SIZE problems: the SFT checkpoint closest to the target is picked on these."""
    return _test_rows(task)[:SELECTION_SIZE]


def selection_file(task: SuiteTask, out_dir: str) -> str:
    """The selection rows as a parquet file in ``out_dir``: a trainer that validates itself (``trainer.test_freq``,
    ``trainer.lr_plateau``) does it on these, never on the held-out rows its run is scored on."""
    import pyarrow.parquet as pq

    from verl.data.tasks import resolve_data_files

    path = os.path.join(out_dir, "selection.parquet")
    os.makedirs(out_dir, exist_ok=True)
    pq.write_table(pq.read_table(resolve_data_files(task.files()[1])).slice(0, SELECTION_SIZE), path)
    return path


def held_out_rows(task: SuiteTask) -> list:
    """The next HELD_OUT_SIZE problems (disjoint from training and from the selection rows): every run is scored on
    these. Picking the checkpoint on the rows it is then scored on favours one whose score was lucky (a maximum of
    noisy evaluations), and every run then looks like it lost ground: regression to the mean, not learning."""
    return _test_rows(task)[SELECTION_SIZE:]


def held_out_accuracy(model, tokenizer, rows: list, task: SuiteTask) -> float:
    """Greedy exact-match accuracy on the held-out rows: the same function for every side and every checkpoint."""
    from verl.utils.evaluation import evaluate_greedy_accuracy

    was_training = model.training
    model.eval()
    try:
        return evaluate_greedy_accuracy(model, tokenizer, rows, max_new_tokens=task.response_length)["acc"]
    finally:
        model.train(was_training)


# --------------------------------------------------------------------------------------------------- warm starts
def smoke_task(task: SuiteTask) -> SuiteTask:
    """The task as ``--smoke`` runs it: a 60-step SFT warm start (its own recipe, so a full one is not reused)."""
    return dataclasses.replace(task, sft_steps=60, sft_every=20)


def sft_recipe(task: SuiteTask) -> list[str]:
    """The SFT overrides that make the task's warm start (its checkpoints' directory and logger aside)."""
    train, test = task.files()
    return [
        f"model.partial_pretrain={task.model}",
        f"data.train_files={train}",
        f"data.val_files={test}",
        f"trainer.total_training_steps={task.sft_steps}",
        *([f"optim.lr={task.sft_lr:g}"] if task.sft_lr is not None else []),
        f"trainer.save_freq={task.sft_every}",
    ]


def sft_command(task: SuiteTask) -> str:
    """The command line that makes the task's warm start; the card keeps it, and a changed one remakes the card."""
    return "python -m verl.trainer.main_sft " + " ".join(sft_recipe(task))


def retire_stale_warm_start(task: SuiteTask, work_dir: str) -> bool:
    """A cached warm start made by another SFT recipe than the task's is moved aside with the task's runs (they
    started from it), so that it is made again; the one line printed says where they went."""
    out = os.path.join(work_dir, "warmstarts", task.name)
    card = os.path.join(out, "warmstart.json")
    if task.shipped or not os.path.isfile(card):
        return False
    with open(card) as f:
        made_by = json.load(f).get("sft", "").split(";")[0]
    if made_by == sft_command(task):
        return False
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs = os.path.join(work_dir, "runs", task.name)
    for path in (out, runs):
        if os.path.isdir(path):
            os.replace(path, f"{path}.stale-{stamp}")
    print(f"{task.name}: the warm start was made by another SFT recipe; it and its runs moved to *.stale-{stamp}")
    return True


def warm_start(task: SuiteTask, work_dir: str, threads: int) -> dict:
    """The task's warm start (made once, then read from ``<work-dir>/warmstarts/<task>/warmstart.json``; made again
    when the task's SFT recipe changed)."""
    out = os.path.join(work_dir, "warmstarts", task.name)
    card = os.path.join(out, "warmstart.json")
    retire_stale_warm_start(task, work_dir)
    if not os.path.isfile(card):
        spec = {"kind": "warmstart", "task": dataclasses.asdict(task), "out": out}
        run_child(spec, os.path.join(out, "make.json"), threads)
    with open(card) as f:
        data = json.load(f)
    if data.get("held_out_size") != HELD_OUT_SIZE:  # a card made before the held-out rows moved past the selection's
        spec = {"kind": "rescore", "task": dataclasses.asdict(task), "out": out}
        data = run_child(spec, os.path.join(out, "rescore.json"), threads)
    return data


def _score_card(task: SuiteTask, card: dict) -> dict:
    """The card with the warm start's accuracy on the held-out rows (``held_out_acc``, the runs' baseline)."""
    from verl.utils.model import load_causal_lm, load_tokenizer

    model = card["model"]
    card["held_out_acc"] = held_out_accuracy(load_causal_lm(model), load_tokenizer(model), held_out_rows(task), task)
    card["held_out_size"] = HELD_OUT_SIZE
    return card


def child_rescore(spec: dict) -> dict:
    """Re-score a warm start chosen on the same rows it was scored on: that score becomes ``selection_acc``."""
    task = SuiteTask(**spec["task"])
    path = os.path.join(spec["out"], "warmstart.json")
    with open(path) as f:
        card = json.load(f)
    card["selection_acc"] = card["held_out_acc"]
    card = _score_card(task, card)
    with open(path, "w") as f:
        json.dump(card, f, indent=1)
    return card


def child_warmstart(spec: dict) -> dict:
    import shutil

    from verl.trainer.main_sft import run_sft
    from verl.utils.config import load_config
    from verl.utils.model import load_causal_lm, load_tokenizer

    task = SuiteTask(**spec["task"])
    out = spec["out"]
    if task.shipped:
        from verl.utils.model import resolve_model_path

        model_dir = resolve_model_path(task.shipped)
        card = _score_card(task, {"task": task.name, "model": model_dir, "base": task.shipped, "sft": "shipped"})
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "warmstart.json"), "w") as f:
            json.dump(card, f, indent=1)
        return card
    sft_dir = os.path.join(out, "sft")
    overrides = [*sft_recipe(task), f"trainer.default_local_dir={sft_dir}", "trainer.logger=[file]"]
    start = time.perf_counter()
    run_sft(load_config("sft_trainer", overrides))
    sft_s = time.perf_counter() - start
    rows = selection_rows(task)
    scores: dict[int, float] = {}

    def score(step: int) -> float:
        if step not in scores:
            ckpt = os.path.join(sft_dir, f"global_step_{step}")
            scores[step] = held_out_accuracy(load_causal_lm(ckpt), load_tokenizer(ckpt), rows, task)
            print(f"{task.name} SFT step {step}: selection rows {scores[step]:.1%}", flush=True)
        return scores[step]

    saved = list(range(task.sft_every, task.sft_steps, task.sft_every))
    coarse = saved[4::5] or saved  # every fifth checkpoint, then every one around the closest of those
    best = min(coarse, key=lambda s: abs(score(s) - task.target))
    for step in saved:
        if abs(step - best) <= 4 * task.sft_every:
            score(step)
    step = min(scores, key=lambda s: abs(scores[s] - task.target))
    model_dir = os.path.join(out, "model")
    shutil.rmtree(model_dir, ignore_errors=True)
    shutil.copytree(os.path.join(sft_dir, f"global_step_{step}"), model_dir)
    shutil.rmtree(sft_dir)
    card = {
        "task": task.name,
        "model": model_dir,
        "base": task.model,
        "sft": sft_command(task) + f"; step {step}",
        "selection_acc": scores[step],
        "step": step,
        "target": task.target,
        "checkpoints": {str(s): a for s, a in scores.items()},
        "sft_s": round(sft_s, 1),
    }
    card = _score_card(task, card)
    with open(os.path.join(out, "warmstart.json"), "w") as f:
        json.dump(card, f, indent=1)
    return card


def target_tolerance(target: float) -> float:
    """How far a warm start may be from its target: TARGET_TOLERANCE, or half a low target (2.5% for 10% is a
    different task to learn from)."""
    return min(TARGET_TOLERANCE, target / 2)


def target_missed(card: dict, target: float) -> bool:
    """Whether the warm start missed its target on the rows it was chosen on (the held-out ones for a shipped one)."""
    return abs(card.get("selection_acc", card["held_out_acc"]) - target) > target_tolerance(target)


def target_missed_warning(task: SuiteTask, step: int, acc: float, out: str) -> str:
    """One line for a warm start that no SFT checkpoint brought near its target: SFT's trajectory depends on the
    CPU's kernels and the thread count (its bits do), and on some tasks it is chaotic enough to end far apart."""
    return (
        f"WARNING: {task.name}: no SFT checkpoint came within {100 * target_tolerance(task.target):g} points "
        f"of the {task.target:.0%} target "
        f"(closest: step {step} at {acc:.1%} on the selection rows); its runs start from there. SFT's path depends on "
        f"the CPU's kernels and --threads: raise the task's sft_steps (or lower its sft_lr), or delete {out} and retry "
        f"with other --threads"
    )


# --------------------------------------------------------------------------------------------------- the runs
class EvalClock:
    """Training time (evaluations excluded) and the evaluations due at fractions of the budget."""

    def __init__(self, budget_s: float, evaluate):
        self.budget_s, self.evaluate = budget_s, evaluate
        self.points = [f * budget_s for f in EVAL_FRACTIONS]
        self.train_s = 0.0
        self.curve: list[dict] = []
        self.trace: list[dict] = []  # every step's logged metrics
        self.steps = 0

    def start(self) -> None:
        self._evaluate_due()
        self._t0 = time.perf_counter()

    def step_done(self, metrics: dict | None = None, count: bool = True) -> bool:
        """Count a finished step (``count``: a training step, else time spent outside one, as a validation before
        training); evaluate when a point is due; True when the budget is spent."""
        self.train_s += time.perf_counter() - self._t0
        self.steps += count
        picked = {k: round(v, 6) for k, v in (metrics or {}).items() if k in LOGGED}
        if picked:
            self.trace.append({"step": self.steps, **picked})
        self._evaluate_due(metrics or {})
        self._t0 = time.perf_counter()
        return self.train_s >= self.budget_s

    def _evaluate_due(self, metrics: dict | None = None) -> None:
        if self.points and self.train_s >= self.points[0]:
            while self.points and self.train_s >= self.points[0]:
                self.points.pop(0)
            row = {"train_s": round(self.train_s, 2), "step": self.steps, "acc": self.evaluate()}
            row.update({k: v for k, v in (metrics or {}).items() if k in LOGGED})
            self.curve.append(row)
            print(json.dumps(row), flush=True)


LOGGED = (
    "critic/score/mean",
    "actor/lr",
    "actor/ppo_kl",
    "actor/policy_drift_kl",
    "actor/entropy",
    "actor/trust_region_stop",
    "actor/pg_clipfrac",
    "actor/grad_norm",
)


def child_ours(spec: dict) -> dict:
    from verl.trainer.main_ppo import build_trainer
    from verl.utils.config import load_config
    from verl.utils.model import load_tokenizer

    task = SuiteTask(**spec["task"])
    train, _ = task.files()
    overrides = [
        "recipe=quickstart",  # main_ppo's built-in settings, on this task's model and data
        f"actor_rollout_ref.model.path={spec['model']}",
        f"data.train_files={train}",
        f"data.val_files={selection_file(task, spec['out'])}",  # the trainer's own validation never sees the scored rows
        f"data.max_response_length={task.response_length}",
        f"data.max_prompt_length={task.prompt_length}",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.total_training_steps=100000",
        "trainer.logger=[]",
        "trainer.resume_mode=disable",
        f"trainer.seed={spec['seed']}",
        f"trainer.default_local_dir={spec['out']}",
        *spec["overrides"],
    ]
    trainer = build_trainer(load_config("ppo_trainer", overrides))
    module = trainer.actor_rollout_wg.actor_module
    tokenizer = load_tokenizer(spec["model"])
    rows = held_out_rows(task)
    clock = EvalClock(spec["budget_s"], lambda: held_out_accuracy(module, tokenizer, rows, task))
    clock.start()
    done = False
    if trainer.config.trainer.val_before_train and trainer.val_reward_fn is not None:  # as fit: counted in budget
        trainer.init()
        trainer.log(trainer.collapse_watch.observed(trainer.validate(), step=0), step=0)
        done = clock.step_done({}, count=False)
    while not done:
        done = clock.step_done(trainer.train_step())
    trainer.shutdown()
    return {"curve": clock.curve, "steps": clock.steps, "trace": clock.trace}


def child_trl(spec: dict) -> dict:
    import tempfile

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from verl.utils.dataset.parquet import render_prompt
    from verl.utils.reward_score import default_compute_score

    task = SuiteTask(**spec["task"])
    torch.manual_seed(spec["seed"])
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    data = Dataset.from_list(
        [
            {
                "prompt": render_prompt(tokenizer, list(r.data["prompt"])),
                "ground_truth": json.dumps(r.data["reward_model"]["ground_truth"]),
                "data_source": r.data["data_source"],
            }
            for r in train_rows(task)
        ]
    )
    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32)

    def task_reward(completions, ground_truth, data_source, **kwargs):
        return [
            float(default_compute_score(src, c, json.loads(gt)))
            for c, gt, src in zip(completions, ground_truth, data_source)
        ]

    prompts, n = 64, 8  # ours: data.train_batch_size=64, rollout.n=8, ppo_mini_batch_size=16
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-suite-"),
        per_device_train_batch_size=16 * n,
        generation_batch_size=prompts * n,  # one generation feeds four optimizer steps, as ours
        gradient_accumulation_steps=1,
        num_generations=n,
        max_completion_length=task.response_length,
        temperature=spec.get("temperature", 1.0),  # TRL's default; --trl-temperature
        top_p=1.0,
        top_k=0,
        learning_rate=spec["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_steps=100000,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        seed=spec["seed"],
        logging_steps=1000000,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=task_reward, args=args, train_dataset=data, processing_class=tokenizer
    )
    rows = held_out_rows(task)
    clock = EvalClock(spec["budget_s"], lambda: held_out_accuracy(trainer.model, tokenizer, rows, task))

    class Budget(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            clock.start()

        def on_step_end(self, args, state, control, **kwargs):
            if clock.step_done():
                control.should_training_stop = True

    trainer.add_callback(Budget())
    trainer.train()
    return {"curve": clock.curve, "steps": clock.steps}


CHILDREN = {"warmstart": child_warmstart, "rescore": child_rescore, "ours": child_ours, "trl": child_trl}


def run_child(spec: dict, result_path: str, threads: int) -> dict:
    """Run one child in a fresh interpreter (its own threads, memory and imports); its result is saved as JSON."""
    os.makedirs(os.path.dirname(result_path), exist_ok=True)
    env = {**os.environ, "PYTHONPATH": ROOT}
    if threads > 0:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    log = result_path.removesuffix(".json") + ".log"
    start = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec), "--child-out", result_path],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )
    if proc.returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"{spec['kind']} {spec['task']['name']} failed (exit {proc.returncode}); {log}:\n{tail}")
    with open(result_path) as f:
        result = json.load(f)
    result["wall_s"] = round(time.perf_counter() - start, 1)
    with open(result_path, "w") as f:
        json.dump(result, f, indent=1)
    return result


def run_side(side: str, task: SuiteTask, seed: int, card: dict, args, lr: float | None = None, overrides=()) -> dict:
    """One run (cached: a finished run's JSON is read back), its summary line printed."""
    label = f"{side}-s{seed}" + (f"-lr{lr:g}" if lr is not None else "")
    path = os.path.join(args.work_dir, "runs", task.name, label + ".json")
    if os.path.isfile(path):
        with open(path) as f:
            return json.load(f)
    spec = {
        "kind": "trl" if side == "trl" else "ours",
        "task": dataclasses.asdict(task),
        "seed": seed,
        "model": card["model"],
        "budget_s": args.budget_s * task.budget_factor,
        "out": os.path.join(args.work_dir, "scratch", task.name, label),
        "overrides": list(overrides),
    }
    if lr is not None:
        spec["lr"] = lr
    if side == "trl":
        spec["temperature"] = args.trl_temperature
    result = run_child(spec, path, args.threads)
    result.update(side=side, seed=seed, lr=lr, label=label)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{task.name} {label}: {summarize_curve(result['curve'], card['held_out_acc'])}", flush=True)
    return result


# --------------------------------------------------------------------------------------------------- summaries
def run_end(curve: list[dict]) -> float:
    """Where a run ended: the mean of its last two evaluations."""
    return statistics.fmean(row["acc"] for row in curve[-2:])


def summarize_curve(curve: list[dict], warm: float) -> str:
    points = " ".join(f"{row['acc']:.0%}@{row['train_s']:.0f}s" for row in curve)
    return f"{points}; end {run_end(curve):.1%}, gain {100 * (run_end(curve) - warm):+.1f}"


def spread(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def task_summary(task: SuiteTask, card: dict, sides: dict[str, list[dict]], trl_lr: dict) -> dict:
    warm = card["held_out_acc"]
    out = {"task": task.name, "what": task.what, "warm": warm, "model": task.model}
    out.update(target=task.target, target_missed=target_missed(card, task.target))
    for side, runs in sides.items():
        gains = [100 * (run_end(r["curve"]) - warm) for r in runs]
        ends = [100 * run_end(r["curve"]) for r in runs]
        out[side] = {
            "gain": spread(gains),
            "end": spread(ends),
            "worst_gain": min(gains),
            # rollouts of 64 prompts x 8 in the budget (TRL counts optimizer steps: four per generation)
            "rollouts": statistics.fmean(r["steps"] / (TRL_STEPS_PER_GENERATION if side == "trl" else 1) for r in runs),
            "seeds": [r["seed"] for r in runs],
        }
    if trl_lr:
        out["trl_lr"] = trl_lr
    return out


def report(summaries: list[dict], args, side_names: list[str]) -> str:
    head = "| task | what | warm start | " + " | ".join(f"{s} end | {s} gain" for s in side_names) + " |"
    lines = [head, "|" + "---|" * (3 + 2 * len(side_names))]
    for s in summaries:
        cells = []
        for side in side_names:
            if side not in s:
                cells += ["", ""]
                continue
            end, gain = s[side]["end"], s[side]["gain"]
            label = f" (lr {s['trl_lr']['best']:g})" if side == "trl" and "trl_lr" in s else ""
            rollouts = f" ({s[side]['rollouts']:.0f} rollouts)"
            cells += [f"{end[0]:.1f} ± {end[1]:.1f}{rollouts}", f"{gain[0]:+.1f} ± {gain[1]:.1f}{label}"]
        missed = f" (target {100 * s['target']:.0f}: missed)" if s.get("target_missed") else ""
        warm = f"{100 * s['warm']:.1f}{missed}"
        lines.append(f"| {s['task']} | {s['what']} | {warm} | " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    checks = acceptance(summaries, side_names)
    if checks:
        text += "\n\n" + "\n".join(f"- {c}" for c in checks)
    return text


def acceptance(summaries: list[dict], side_names: list[str]) -> list[str]:
    out = []
    ours = [n for n in side_names if n != "trl"]
    for name in ours:
        rows = [s for s in summaries if name in s]
        if not rows:
            continue
        worst = min(rows, key=lambda s: s[name]["worst_gain"])
        ok = worst[name]["worst_gain"] >= -FLOOR_POINTS
        out.append(
            f"{name}: worst run {worst[name]['worst_gain']:+.1f} points against its warm start ({worst['task']}); "
            f"the floor is -{FLOOR_POINTS:g}: {'met' if ok else 'NOT met'}"
        )
        both = [s for s in rows if "trl" in s]
        if both:
            mine = statistics.fmean(s[name]["gain"][0] for s in both)
            theirs = statistics.fmean(s["trl"]["gain"][0] for s in both)
            ok = mine >= theirs + MARGIN_POINTS
            out.append(
                f"{name}: mean gain {mine:+.1f} points over {len(both)} tasks against TRL's best-learning-rate "
                f"{theirs:+.1f} (difference {mine - theirs:+.1f}, the bar +{MARGIN_POINTS:g}): "
                f"{'met' if ok else 'NOT met'}"
            )
    return out


def plot(results: dict, cards: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    cols = 3
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        for side, runs in results[name].items():
            if not runs:
                continue
            k = min(len(r["curve"]) for r in runs)
            xs = [statistics.fmean(r["curve"][i]["train_s"] for r in runs) for i in range(k)]
            accs = [[100 * r["curve"][i]["acc"] for r in runs] for i in range(k)]
            line = ax.plot(xs, [statistics.fmean(a) for a in accs], marker="o", ms=3, label=side)[0]
            ax.fill_between(xs, [min(a) for a in accs], [max(a) for a in accs], alpha=0.2, color=line.get_color())
        ax.axhline(100 * cards[name]["held_out_acc"], color="grey", lw=0.8, ls="--")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("training time (s)", fontsize=8)
        ax.set_ylabel("held-out accuracy (%)", fontsize=8)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)


# --------------------------------------------------------------------------------------------------- main
def parse_variant(text: str) -> tuple[str, list[str]]:
    name, _, rest = text.partition(":")
    return name, [kv for kv in rest.split(",") if kv]


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default=None, help="comma-separated task names (default: all)")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--sides", default="ours,trl", help="ours (and --variant names) and/or trl")
    p.add_argument("--variant", action="append", default=[], help="NAME:key=value,... a configuration of ours")
    p.add_argument(
        "--budget-s", type=float, default=45.0, help="training seconds per run (times the task's budget_factor)"
    )
    p.add_argument("--trl-lrs", default=",".join(f"{lr:g}" for lr in TRL_LRS))
    p.add_argument(
        "--trl-temperature",
        type=float,
        default=1.0,
        help="TRL's sampling temperature (its default 1; use its own --work-dir)",
    )
    p.add_argument("--threads", type=int, default=2, help="OpenMP threads per run")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (2 with --threads 1 uses both cores)")
    p.add_argument("--work-dir", default="outputs/learning_suite")
    p.add_argument("--smoke", action="store_true", help=f"CI: {SMOKE_TASK} (60 SFT steps), seed 1, 4 s budget")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--quick-start", action="store_true", help="the default main job over --seeds instead")
    p.add_argument("--tune", type=int, default=0, help="N trials of verl tune over --tune-space on --tasks (seed 1)")
    p.add_argument("--tune-space", default=os.path.join(ROOT, "examples", "tune", "trust_region_space.yaml"))
    p.add_argument("--write-docs", action="store_true", help="put the section into docs/results.md")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        result = CHILDREN[spec["kind"]](spec)
        with open(args.child_out, "w") as f:
            json.dump(result, f)
        return [result]
    if args.smoke:  # the whole pipeline in about a minute: a short SFT warm start, one seed, one TRL rate
        args.tasks, args.seeds, args.budget_s, args.jobs, args.threads = SMOKE_TASK, "1", 4.0, 2, 1
        args.trl_lrs = args.trl_lrs if "," not in args.trl_lrs else f"{TRL_LRS[1]:g}"
    args.work_dir = os.path.abspath(args.work_dir)
    args.trl_lrs = [float(x) for x in args.trl_lrs.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    variants = dict(parse_variant(v) for v in args.variant)
    side_names = [s for s in args.sides.split(",") if s]
    side_names += [v for v in variants if v not in side_names]
    if args.quick_start:
        text = quick_start(seeds, args)
        print(text)
        if args.write_docs:
            _write_quick_start(text, args)
        return []
    tasks = get_tasks(args.tasks)
    if args.smoke:
        tasks = [smoke_task(t) for t in tasks]
    cards = {t.name: warm_start(t, args.work_dir, args.threads) for t in tasks}
    for task in tasks:
        card = cards[task.name]
        print(f"{task.name}: warm start {card['held_out_acc']:.1%} ({card['sft'].split(';')[-1].strip()})", flush=True)
        if "step" in card and target_missed(card, task.target):  # an SFT warm start (not a shipped one)
            print(
                target_missed_warning(task, card["step"], card["selection_acc"], os.path.dirname(card["model"])),
                flush=True,
            )
    if args.tune:
        return [tune(tasks, cards, args)]
    if not args.report_only:
        run_suite(tasks, cards, seeds, side_names, variants, args)
    summaries, results = [], {}
    for task in tasks:
        trl_lr = _saved_trl_lr(task, cards[task.name], args, seeds[0]) if "trl" in side_names else {}
        runs = {side: [_saved(task, side, seed, args, trl_lr) for seed in seeds] for side in side_names}
        runs = {side: [r for r in rs if r] for side, rs in runs.items()}
        runs = {side: rs for side, rs in runs.items() if rs}
        results[task.name] = runs
        summaries.append(task_summary(task, cards[task.name], runs, trl_lr))
    text = report(summaries, args, side_names)
    print(text)
    img = os.path.join(args.work_dir, "learning_suite.png")
    plot(results, cards, img)
    if args.write_docs:
        write_docs(text, summaries, cards, args, img)
    with open(os.path.join(args.work_dir, "summary.json"), "w") as f:
        json.dump(summaries, f, indent=1)
    return summaries


def run_suite(
    tasks: list[SuiteTask], cards: dict, seeds: list[int], side_names: list[str], variants: dict, args
) -> None:
    """Every run, ``--jobs`` at a time, in two waves: ours (and variants) for every seed interleaved with TRL's
    learning-rate search on the first seed; then TRL's other seeds at the rate that search chose per task."""
    from concurrent.futures import ThreadPoolExecutor

    def wave(jobs: list[tuple]) -> None:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [
                pool.submit(run_side, side, task, seed, cards[task.name], args, lr, variants.get(side, ()))
                for side, task, seed, lr in jobs
            ]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise RuntimeError(f"{len(errors)} of {len(jobs)} runs failed; the first: {errors[0]}")

    first = []
    for task in tasks:
        ours = [(side, task, seed, None) for seed in seeds for side in side_names if side != "trl"]
        search = [("trl", task, seeds[0], lr) for lr in args.trl_lrs] if "trl" in side_names else []
        for i in range(max(len(ours), len(search))):  # alternate the sides: concurrent runs slow them alike
            first += ours[i : i + 1] + search[i : i + 1]
    wave(first)
    if "trl" in side_names:
        best = {t.name: _saved_trl_lr(t, cards[t.name], args, seeds[0])["best"] for t in tasks}
        wave([("trl", task, seed, best[task.name]) for task in tasks for seed in seeds[1:]])


def tune(tasks: list[SuiteTask], cards: dict, args) -> dict:
    """``verl tune``'s study (Optuna, resumable storage under the work dir) over ``--tune-space``: each trial runs
    ours with the sampled overrides on every task (seed 1) and scores mean gain + worst gain, in points."""
    from verl.tune import run_study, suggest_overrides

    def objective(trial) -> float:
        name = f"tune{trial.number}"
        overrides = suggest_overrides(trial, args.tune_space)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:  # the tasks --jobs at a time
            runs = list(pool.map(lambda t: run_side(name, t, 1, cards[t.name], args, overrides=overrides), tasks))
        gains = [100 * (run_end(r["curve"]) - cards[t.name]["held_out_acc"]) for r, t in zip(runs, tasks)]
        trial.set_user_attr("gains", {t.name: round(g, 1) for t, g in zip(tasks, gains)})
        return statistics.fmean(gains) + min(gains)

    out = os.path.join(args.work_dir, "tune")
    result = run_study(
        objective=objective, n_trials=args.tune, study_name="learning-suite", output_dir=out, seed=0, pruner="none"
    )
    best = result.study.best_trial
    print(f"best trial {best.number}: mean + worst gain {best.value:.1f}, {best.params}, {best.user_attrs}")
    return {"best": best.params, "value": best.value, "gains": best.user_attrs.get("gains")}


def quick_start(seeds: list[int], args) -> str:
    """The default quick start (``python -m verl.trainer.main_ppo``, nothing changed but ``trainer.seed``) per seed:
    the held-out accuracy it starts from and where it ends, the mean of its last 3 evaluations (the line it prints),
    and the spread of that over seeds."""
    from verl.trainer.main_ppo import FINAL_EVALS

    rows = []
    for seed in seeds:
        out = os.path.join(args.work_dir, "quick_start", f"seed{seed}")
        if not os.path.isfile(os.path.join(out, "done.json")):
            import shutil

            shutil.rmtree(out, ignore_errors=True)
            cmd = [sys.executable, "-m", "verl.trainer.main_ppo", f"trainer.seed={seed}"]
            cmd += [f"trainer.default_local_dir={out}", "trainer.resume_mode=disable", "trainer.save_freq=-1"]
            start = time.perf_counter()
            env = {**os.environ, "PYTHONPATH": ROOT}
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                raise RuntimeError(f"quick start seed {seed} failed:\n{proc.stderr[-3000:]}")
            line = [x for x in proc.stdout.splitlines() if x.startswith("held-out greedy accuracy")][-1]
            with open(os.path.join(out, "done.json"), "w") as f:
                json.dump({"wall_s": round(time.perf_counter() - start, 1), "line": line}, f)
        with open(os.path.join(out, "metrics.jsonl")) as f:
            evals = [(r["step"], r["val-core/acc"]) for r in map(json.loads, f) if "val-core/acc" in r]
        with open(os.path.join(out, "done.json")) as f:
            done = json.load(f)
        end = statistics.fmean(a for _, a in evals[1:][-FINAL_EVALS:])
        rows.append({"seed": seed, "evals": evals, "end": end, "wall_s": done["wall_s"], "line": done["line"]})
    ends = [100 * r["end"] for r in rows]
    gains = [100 * (r["end"] - r["evals"][0][1]) for r in rows]
    steps = [s for s, _ in rows[0]["evals"]]
    lines = ["| step | " + " | ".join(f"seed {r['seed']}" for r in rows) + " |", "|---|" + "---|" * len(rows)]
    for i, step in enumerate(steps):
        lines.append(f"| {step} | " + " | ".join(f"{100 * r['evals'][i][1]:.1f}" for r in rows) + " |")
    mean, sd = spread(ends)
    lines += [
        "",
        f"End (mean of the last {FINAL_EVALS} evaluations): "
        + ", ".join(f"{e:.1f}" for e in ends)
        + f"; mean {mean:.1f}, spread {min(ends) - mean:+.1f} / {max(ends) - mean:+.1f} points (sd {sd:.1f}); "
        + f"gain {statistics.fmean(gains):+.1f} (min {min(gains):+.1f}); wall "
        + ", ".join(f"{r['wall_s']:.0f}" for r in rows)
        + " s.",
    ]
    return "\n".join(lines)


def _saved(task: SuiteTask, side: str, seed: int, args, trl_lr: dict) -> dict | None:
    label = f"{side}-s{seed}" + (f"-lr{trl_lr['best']:g}" if side == "trl" and trl_lr else "")
    path = os.path.join(args.work_dir, "runs", task.name, label + ".json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return json.load(f)


def _saved_trl_lr(task: SuiteTask, card: dict, args, seed: int = 1) -> dict:
    """TRL's learning rate for ``task``: the best gain of ``seed`` over ``--trl-lrs`` (that run is its seed too)."""
    gains = {}
    for lr in args.trl_lrs:
        run = _saved(task, "trl", seed, args, {"best": lr})
        if run:
            gains[lr] = run_end(run["curve"]) - card["held_out_acc"]
    if not gains:
        return {}
    return {"best": max(gains, key=gains.get), "gains": {f"{lr:g}": round(100 * g, 1) for lr, g in gains.items()}}


QUICK_SECTION = "## The quick start over seeds"


def _write_quick_start(text: str, args) -> None:
    from rl_curves import _commit, upsert_section

    setup = (
        f"Measured by `python benchmarks/learning_suite.py --quick-start --seeds {args.seeds}` at commit "
        f"{_commit()} on {platform.machine()} with {os.cpu_count()} CPU cores, {time.strftime('%Y-%m-%d')}, one run at a "
        "time: the default `python -m verl.trainer.main_ppo` with only `trainer.seed` changed. Held-out greedy "
        "accuracy on the 200 test problems, in %:"
    )
    upsert_section(os.path.join(ROOT, "docs", "results.md"), QUICK_SECTION, f"{QUICK_SECTION}\n\n{setup}\n\n{text}\n")


def write_docs(text: str, summaries: list[dict], cards: dict, args, img: str) -> None:
    import shutil

    from rl_curves import _commit, upsert_section

    rel = "img/learning_suite.png"
    shutil.copyfile(img, os.path.join(ROOT, "docs", rel))
    trl = "; ".join(f"{s['task']} {s['trl_lr']['gains']}" for s in summaries if "trl_lr" in s)
    setup = (
        f"Measured by `python benchmarks/learning_suite.py --budget-s {args.budget_s:g} --seeds {args.seeds} "
        f"--jobs {args.jobs} --threads {args.threads}` at commit {_commit()} on "
        f"{platform.machine()} with {os.cpu_count()} CPU cores ({args.threads} thread(s) per run, {args.jobs} run(s) at a time), "
        f"{time.strftime('%Y-%m-%d')}. Each run trained for {args.budget_s:g} s of training time "
        "("
        + ", ".join(
            sorted({f"{args.budget_s * t.budget_factor:g} s on {t.name}" for t in TASKS if t.budget_factor != 1})
        )
        + f"), evaluated greedily on its task's {HELD_OUT_SIZE} "
        f"held-out problems (the test split's rows {SELECTION_SIZE}-{SELECTION_SIZE + HELD_OUT_SIZE - 1}; the warm start "
        f"was chosen on rows 0-{SELECTION_SIZE - 1}) at 0, 1/4, 1/2, 3/4 and all of it; end = mean of the last two evaluations, in %; "
        "mean ± standard deviation over seeds. TRL's gains of seed 1 per learning rate (the best one used): "
        f"{trl or 'not run'}."
    )
    section = f"{SECTION}\n\n{setup}\n\n{text}\n\n![held-out accuracy against training time]({rel})\n"
    upsert_section(os.path.join(ROOT, "docs", "results.md"), SECTION, section)


if __name__ == "__main__":
    main()
