"""A short PPO run through the agent loop: ``rollout.mode=async``, ``multi_turn.enable=true``, verl's tool YAML (the
built-in calculator) and a dataset whose ``agent_name`` column sends half the rows to ``tool_agent`` and half to
``single_turn_agent``, on the shipped tiny model. The tiny model never writes a ``<tool_call>`` by itself, so the
tool rows read every model turn as a calculator call (a parser registered here): the calculator really runs
between real model turns, and the step trains on the trajectories."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verl.data.tasks import resolve_data_files
from verl.engine import StepCallback
from verl.experimental.agent_loop import FunctionCall, ParsedToolCalls, ToolParser
from verl.trainer.main_ppo import run_ppo
from verl.utils.config import load_config
from verl.utils.wall_clock import WALL_CLOCK

CALCULATOR = "examples/agent_loop/tool_configs/calculator.yaml"


@ToolParser.register("test_every_turn_calls_calculator")
class EveryTurnCallsCalculator(ToolParser):
    def parse_text(self, text: str) -> ParsedToolCalls:
        return ParsedToolCalls(content=text, calls=[FunctionCall("calculator", json.dumps({"expression": "6*7"}))])


def agent_rows(tmp_path, spec: str, name: str) -> str:
    """The builtin arithmetic rows of ``spec`` with an ``agent_name`` column: tool_agent, single_turn_agent, ..."""
    table = pq.read_table(resolve_data_files(spec))
    agents = ["tool_agent" if i % 2 == 0 else "single_turn_agent" for i in range(table.num_rows)]
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{name}.parquet"
    pq.write_table(table.append_column("agent_name", pa.array(agents)), path)
    return str(path)


def agent_config(tmp_path, *extra: str):
    return load_config(
        "ppo_trainer",
        [
            "recipe=quickstart",
            f"data.train_files={agent_rows(tmp_path, 'builtin://arithmetic/train?train_size=32', 'train')}",
            f"data.val_files={agent_rows(tmp_path, 'builtin://arithmetic/test?test_size=8', 'val')}",
            "data.train_batch_size=4",
            "data.shuffle=false",  # every batch holds both agents
            "data.max_response_length=64",
            "actor_rollout_ref.rollout.n=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.rollout.mode=async",
            "actor_rollout_ref.rollout.multi_turn.enable=true",
            f"actor_rollout_ref.rollout.multi_turn.tool_config_path={CALCULATOR}",
            "actor_rollout_ref.rollout.multi_turn.format=test_every_turn_calls_calculator",
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2",
            "trainer.total_training_steps=2",
            "trainer.test_freq=2",
            "trainer.logger=[file]",
            f"trainer.default_local_dir={tmp_path / 'run'}",
            f"trainer.rollout_data_dir={tmp_path / 'rollouts'}",
            *extra,
        ],
    )


@pytest.mark.slow
def test_two_steps_through_the_agent_loop_with_the_calculator(tmp_path):
    result = run_ppo(agent_config(tmp_path))
    h = result["history"]
    assert result["global_steps"] == 2
    last = {k: v[-1][1] for k, v in h.items()}
    # half the rows (tool_agent) took 2 model turns and 1 calculator turn; the others one model turn
    assert last["num_turns/min"] == 2 and last["num_turns/max"] == 4
    assert last["agent_loop/num_tool_calls/mean"] == 0.5 and last["agent_loop/tool_errors/total"] == 0
    assert last["agent_loop/tokenization_mismatch"] == 0.0
    for key in ("actor/pg_loss", "critic/score/mean", "agent_loop/tool_latency_s/mean", "val-core/acc"):
        assert key in h, key
    dumped = [json.loads(line) for line in open(tmp_path / "rollouts" / "2.jsonl")]
    assert any("\ntool\n42\nassistant\n" in row["output"] for row in dumped)  # the transcript, specials dropped
    # each trajectory's agent-loop facts are in its line: a tool row 4 turns and 1 call, a single-turn row 2 and none
    assert {(row["num_turns"], row["num_tool_calls"]) for row in dumped} == {(4, 1), (2, 0)}
    # (every model turn reads as a call here, so a tool row ends at max_assistant_turns=2)
    assert {row["finish_reason"] for row in dumped if row["num_turns"] == 4} == {"max_assistant_turns"}
    assert all(row["tool_errors"] == 0 for row in dumped)


class StopAfter(StepCallback):
    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, trainer, batch, metrics):
        return trainer.global_steps < self.step


def without_wall_clock(history: dict, step: int) -> dict[str, float]:
    skip = ("timing_s/", "timing_per_token_ms/", "perf/time_per_step", "perf/throughput", "agent_loop/generate_seq")
    skip += ("agent_loop/tool_calls/", "agent_loop/tool_latency")
    return {k: v for k, points in history.items() if not k.startswith(skip) for s, v in points if s == step}


@pytest.mark.slow
def test_same_seed_same_run_and_a_resumed_run_gives_the_uninterrupted_next_step(tmp_path):
    """The agent loop's seeds come from the run's Python RNG (seeded by trainer.seed, saved in checkpoints): a second
    run repeats the first bit for bit, and a run resumed after step 1 takes the uninterrupted run's step 2."""
    args = ["trainer.save_freq=1", "trainer.test_freq=-1", "trainer.val_before_train=false"]
    full = run_ppo(agent_config(tmp_path / "full", *args))
    again = run_ppo(agent_config(tmp_path / "again", *args))
    for step in (1, 2):
        assert without_wall_clock(full["history"], step) == without_wall_clock(again["history"], step)
    run_ppo(agent_config(tmp_path / "resumed", *args), callbacks=[StopAfter(1)])  # "killed" after step 1
    resumed = run_ppo(agent_config(tmp_path / "resumed", *args))
    assert resumed["history"]["actor/pg_loss"][0][0] == 2
    assert without_wall_clock(resumed["history"], 2) == without_wall_clock(full["history"], 2)


@pytest.mark.slow
def test_colocate_async_runs_the_agent_loop_on_its_ahead_engine(tmp_path):
    """``trainer.v1.trainer_mode=colocate_async`` with the agent loop: the ahead engine serves the turns of batches
    generated while the trainer trains. At zero lag it is the synchronous trainer bit for bit (each batch's seed key
    drawn from the run's RNG in the same order), but for the sampler's own log-probs: the ahead engine's per-request
    decode gives them with other float rounding than the hybrid engine's (1e-7 here; the cause is not located yet),
    so the diagnostics comparing them with the actor's differ in their last digits. One step off, every metric
    repeats run to run."""
    args = ["trainer.test_freq=-1", "trainer.val_before_train=false", "trainer.num_threads=1"]
    colocate = ["trainer.v1.trainer_mode=colocate_async"]
    sync = run_ppo(agent_config(tmp_path / "sync", *args))
    lag0 = run_ppo(agent_config(tmp_path / "lag0", *args, *colocate, "trainer.v1.colocate_async.num_warmup_batches=0"))
    rounding = ("rollout_corr/", "training/rollout_", *WALL_CLOCK)
    for step in (1, 2):
        a, b = without_wall_clock(lag0["history"], step), without_wall_clock(sync["history"], step)
        assert {k: v for k, v in a.items() if not k.startswith(rounding)} == {
            k: v for k, v in b.items() if not k.startswith(rounding)
        }
        assert a["rollout_corr/log_ppl_abs_diff"] < 1e-5 and b["rollout_corr/log_ppl_abs_diff"] < 1e-5
    one = [run_ppo(agent_config(tmp_path / f"lag1-{i}", *args, *colocate)) for i in range(2)]
    for step in (1, 2):
        a, b = without_wall_clock(one[0]["history"], step), without_wall_clock(one[1]["history"], step)
        assert {k: v for k, v in a.items() if not k.startswith(WALL_CLOCK)} == {
            k: v for k, v in b.items() if not k.startswith(WALL_CLOCK)
        }
    h = one[0]["history"]
    assert [v for _, v in h["training/off_policy/trajectory_staleness/max"]] == [0, 1]
    assert h["num_turns/max"][-1][1] == 4  # tool rows ran their calculator turn on the ahead engine
