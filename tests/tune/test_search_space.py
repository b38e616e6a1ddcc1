"""Search-space files, objectives, samplers/pruners and resume bookkeeping (no trainer runs: fast)."""

from __future__ import annotations

import os

import optuna
import pytest

from verl.tune import SearchSpaceError, load_search_space
from verl.tune.runner import TrialRun, aggregate
from verl.tune.search_space import check_against_config, format_override
from verl.tune.study import EarlyStop, Objective, _Watch, make_pruner, make_sampler, recover_stale_trials
from verl.utils.config import load_config


def write(tmp_path, text: str) -> str:
    p = tmp_path / "space.yaml"
    p.write_text(text)
    return str(p)


def test_every_distribution_type(tmp_path):
    space = load_search_space(
        write(
            tmp_path,
            """
params:
  actor_rollout_ref.actor.optim.lr: {type: loguniform, low: 1e-5, high: 1e-3}
  algorithm.kl_ctrl.kl_coef: {type: float, low: 0.01, high: 0.2}
  algorithm.lam: {type: float, low: 0.9, high: 1.0, step: 0.05}
  actor_rollout_ref.rollout.n: {type: int, low: 4, high: 8, step: 2}
  data.train_batch_size: [16, 32]
  algorithm.adv_estimator: {type: categorical, choices: [grpo, rloo]}
fixed:
  algorithm.use_kl_in_reward: true
""",
        )
    )
    p = space.params
    assert p["actor_rollout_ref.actor.optim.lr"].log and p["actor_rollout_ref.actor.optim.lr"].low == 1e-5
    assert p["actor_rollout_ref.rollout.n"].type == "int" and p["actor_rollout_ref.rollout.n"].grid_values() == [
        4,
        6,
        8,
    ]
    assert p["data.train_batch_size"].choices == [16, 32]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    values = space.suggest(trial)
    assert 1e-5 <= values["actor_rollout_ref.actor.optim.lr"] <= 1e-3
    assert values["actor_rollout_ref.rollout.n"] in (4, 6, 8)
    overrides = space.overrides(values)
    assert "algorithm.use_kl_in_reward=true" in overrides
    cfg = load_config("ppo_trainer", overrides)  # every override is a valid config value of the right type
    assert cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(values["actor_rollout_ref.actor.optim.lr"])
    grid = make_sampler(
        "grid", 0, space.without({"actor_rollout_ref.actor.optim.lr", "algorithm.kl_ctrl.kl_coef"}), False, 4
    )
    assert isinstance(grid, optuna.samplers.GridSampler)
    with pytest.raises(SearchSpaceError, match="actor_rollout_ref.actor.optim.lr.*grid"):
        make_sampler("grid", 0, space, False, 4)
    assert format_override("x.lr", 1e-05) == "x.lr=1.0e-05"


@pytest.mark.parametrize(
    "text, match",
    [
        ("params:\n  a.b: {type: float, low: 1}\n", r"'a.b' \(line 2\).*needs `low` and `high`"),
        ("params:\n  a.b: {type: gaussian, low: 0, high: 1}\n", "'a.b'.*unknown type 'gaussian'"),
        ("params:\n  a.b: {type: float, low: 0, high: 1, log: true}\n", "'a.b'.*log-scale range needs low > 0"),
        ("params:\n  a.b: {type: int, low: 0.5, high: 3}\n", "'a.b'.*integer `low`"),
        ("params:\n  a.b: {type: float, low: 2, high: 1}\n", "'a.b'.*above high"),
        ("params:\n  a.b: {type: categorical, choices: []}\n", "'a.b'.*non-empty `choices"),
        ("params:\n  a.b: {type: float, lo: 0, high: 1}\n", r"'a.b'.*unknown field\(s\) \['lo'\]"),
        ("parameters:\n  a.b: [1, 2]\n", "unknown top-level key"),
        ("params: [\n", "not valid YAML"),
    ],
)
def test_bad_files_name_the_key_and_line(tmp_path, text, match):
    with pytest.raises(SearchSpaceError, match=match):
        load_search_space(write(tmp_path, text))


def test_unknown_config_key_names_closest(tmp_path):
    space = load_search_space(
        write(tmp_path, "params:\n  actor_rollout_ref.actor.optim.lrr: {low: 1e-4, high: 1e-3}\n")
    )
    with pytest.raises(SearchSpaceError, match="Did you mean 'actor_rollout_ref.actor.optim.lr'"):
        check_against_config(space, [])


@pytest.mark.slow
def test_default_space_matches_example_and_config(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    with open(os.path.join(root, "examples", "tune", "search_space.yaml")) as f:
        assert load_search_space(f.name).params.keys() == load_search_space(None).params.keys()
    space = load_search_space(None)
    assert set(space.params) == {
        "algorithm.kl_ctrl.kl_coef",
        "algorithm.gamma",
        "data.train_batch_size",
        "actor_rollout_ref.actor.optim.lr",
        "algorithm.reward_temp",
    }
    kept, notes = check_against_config(space, [], drop_unknown=True)
    assert "algorithm.gamma" not in kept.params and any("inert" in n for n in notes)  # grpo ignores gamma
    kept, _ = check_against_config(space, ["algorithm.adv_estimator=reinforce_plus_plus"], drop_unknown=True)
    assert "algorithm.gamma" in kept.params


def test_objective_aggregation_and_weights():
    run = TrialRun(
        0,
        None,
        [
            {"step": 0, "val-core/acc": 0.9},
            {"step": 1, "val-core/acc": 0.2, "response_length/mean": 10.0},
            {"step": 2, "val-core/acc": 0.4, "response_length/mean": 6.0},
            {"step": 3, "val-core/acc": 0.3, "response_length/mean": 8.0},
        ],
    )
    assert Objective(aggregation="last").values(run) == [0.3]
    assert Objective(aggregation="best").values(run) == [0.4]  # step 0 (before training) left out
    assert Objective(aggregation="mean2").values(run) == [pytest.approx(0.35)]
    o = Objective.parse(["val-core/acc:max", "response_length/mean:min"], weights=[1.0, 0.1])
    assert not o.multi and o.study_directions == ["maximize"]
    assert o.values(run) == [pytest.approx(0.3 - 0.8)]
    mo = Objective.parse(["val-core/acc", "response_length/mean:min"])
    assert mo.multi and mo.study_directions == ["maximize", "minimize"]
    with pytest.raises(Exception, match="never logged"):
        Objective(["val-core/accc"]).values(run)
    nan = TrialRun(0, None, [{"step": 1, "val-core/acc": None}])
    with pytest.raises(Exception, match="NaN"):
        Objective().values(nan)
    assert aggregate([(0, 1.0)], "last") == 1.0


def test_early_stop_and_pruner_watch():
    study = optuna.create_study(direction="maximize", pruner=make_pruner("threshold:0.5", 10))
    w = _Watch(study.ask(), Objective(), EarlyStop.parse("eval/reward_std<0.05:3"))
    assert w({"step": 0, "val-core/acc": 0.1}) is None  # step 0 is not reported
    assert w({"step": 1, "val-core/acc": 0.6, "eval/reward_std": 0.01}) is None
    assert w({"step": 2, "val-core/acc": 0.7, "eval/reward_std": 0.01}) is None
    assert w({"step": 3, "val-core/acc": 0.7, "eval/reward_std": 0.01}) == "stop"
    w = _Watch(study.ask(), Objective(), None)
    assert w({"step": 1, "val-core/acc": 0.4}) == "prune" and w.pruned_at == 1
    w = _Watch(optuna.create_study(direction="maximize").ask(), Objective(), EarlyStop.parse("plateau:2"))
    assert [w({"step": s, "val-core/acc": v}) for s, v in [(1, 0.5), (2, 0.5), (3, 0.4)]] == [None, None, "stop"]
    for spec in ("median", "hyperband", "none", "percentile:30"):
        make_pruner(spec, 20)
    for name in ("tpe", "random", "cmaes", "nsga2"):
        make_sampler(name, 0, load_search_space(None), False, 6)
    with pytest.raises(ValueError, match="unknown sampler"):
        make_sampler("bayes", 0, load_search_space(None), False, 6)


def test_stale_running_trial_is_failed_and_requeued(tmp_path):
    import socket
    import subprocess
    import sys

    from verl.tune.study import WORKER, make_storage
    from verl.tune.study import count_trials as _counts

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    storage = make_storage(f"sqlite:///{tmp_path}/s.db", str(tmp_path))
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize")
    t = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    t.set_user_attr(WORKER, {"host": socket.gethostname(), "pid": dead.pid})
    other = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})  # a live tuner elsewhere, fresh heartbeat
    other.set_user_attr(WORKER, {"host": "another-machine", "pid": dead.pid})
    assert recover_stale_trials(study, storage) == [t.number]
    frozen = study.trials
    assert frozen[t.number].state.name == "FAIL" and "interrupted" in frozen[t.number].user_attrs["fail_reason"]
    assert frozen[other.number].state.name == "RUNNING"
    waiting = [x for x in frozen if x.state.name == "WAITING"]
    assert len(waiting) == 1 and waiting[0].user_attrs["retry_of"] == t.number
    assert recover_stale_trials(study, storage) == []  # only once
    assert _counts(study)["waiting"] == 1 and _counts(study)["running"] == 1


@pytest.mark.slow
def test_every_example_search_space_parses_against_the_ppo_schema():
    import glob

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    files = sorted(glob.glob(os.path.join(root, "examples", "tune", "*space*.yaml")))
    assert len(files) >= 2
    for path in files:
        space = load_search_space(path)
        assert space.params, path
        checked, _ = check_against_config(space, [])
        assert checked.params, path


def test_trials_save_no_checkpoints_unless_the_base_config_asks(tmp_path):
    from verl.tune.runner import build_argv
    from verl.utils.config import load_config

    def save_freq(base):
        argv = build_argv(base, [], str(tmp_path / "trial"))
        return load_config("ppo_trainer", argv).trainer.save_freq

    quiet = tmp_path / "quiet.yaml"
    quiet.write_text("trainer:\n  seed: 3\n")
    saving = tmp_path / "saving.yaml"
    saving.write_text("trainer:\n  save_freq: 5\n")
    assert save_freq([]) == -1
    assert save_freq(["--config", str(quiet)]) == -1  # a config file that does not mention it
    assert save_freq([f"--config={saving}"]) == 5
    assert save_freq(["trainer.save_freq=7"]) == 7


def test_every_choice_and_grid_value_is_checked_and_base_typos_are_named_as_such(tmp_path):
    bad_choice = "params:\n  actor_rollout_ref.actor.optim.lr: {type: categorical, choices: [1.0e-4, abc]}\n"
    with pytest.raises(SearchSpaceError, match="value 'abc'.*expects a number"):
        check_against_config(load_search_space(write(tmp_path, bad_choice)), [])
    bad_grid = "params:\n  data.train_batch_size: {type: int, low: 4, high: 16, grid: [4, abc]}\n"
    with pytest.raises(SearchSpaceError, match="value 'abc'"):
        check_against_config(load_search_space(write(tmp_path, bad_grid)), [])
    good = "params:\n  actor_rollout_ref.actor.optim.lr: {low: 1.0e-4, high: 1.0e-3}\n"
    with pytest.raises(SearchSpaceError, match="base overrides.*data.train_batch_sise"):
        check_against_config(load_search_space(write(tmp_path, good)), ["data.train_batch_sise=4"])


@pytest.mark.slow
def test_resuming_a_study_with_another_objective_or_distribution_is_one_error(tmp_path):
    from verl.tune import run_study

    def objective(trial):
        return trial.suggest_float("x", 0.0, 1.0)

    common = dict(objective=objective, n_trials=1, output_dir=str(tmp_path), progress=False, report=False, seed=0)
    run_study(metrics=["score"], directions=["maximize"], **common)
    with pytest.raises(ValueError, match=r"created with objective \['score'\] \['maximize'\], not \['cost'\]"):
        run_study(metrics=["cost"], directions=["minimize"], **common)
    space = write(tmp_path, "params:\n  x: {type: categorical, choices: [a, b]}\n")
    with pytest.raises(ValueError, match="parameter 'x' was searched as FloatDistribution.*CategoricalDistribution"):
        run_study(metrics=["score"], directions=["maximize"], search_space=space, **{**common, "n_trials": 2})
    res = run_study(metrics=["score"], directions=["maximize"], **{**common, "n_trials": 2})  # same settings: resumes
    assert len(res.study.trials) == 2


def test_tuner_option_values_are_checked_with_the_option_named(tmp_path):
    obj = Objective.parse(["val-core/acc:MAX", "response_length/mean:Min"])
    assert obj.metrics == ["val-core/acc", "response_length/mean"] and obj.directions == ["maximize", "minimize"]
    for how in ("mean-3", "meanabc", "mean0"):
        with pytest.raises(ValueError, match="meanK needs a whole number K >= 1"):
            aggregate([(1, 0.5)], how)
    assert aggregate([(1, 1.0), (2, 3.0), (3, 5.0)], "mean2") == 4.0
    for spec in ("a<0.5:0", "plateau:0"):
        with pytest.raises(ValueError, match="K >= 1"):
            EarlyStop.parse(spec)
    with pytest.raises(ValueError, match="--pruner 'percentile:abc'"):
        make_pruner("percentile:abc", 10, 1)
    from verl.tune.study import make_storage

    storage = make_storage(str(tmp_path / "plain.db"), str(tmp_path))  # a bare path is an SQLite file
    optuna.create_study(storage=storage, study_name="s")
    assert (tmp_path / "plain.db").exists()


def test_search_space_spelling_mistakes_get_a_precise_message(tmp_path):
    import yaml

    with pytest.raises(SearchSpaceError, match="`log` must be true or false"):
        load_search_space(write(tmp_path, "params:\n  a.b: {low: 1.0e-4, high: 1.0e-3, log: 'false'}\n"))
    nested = "params:\n  algorithm:\n    kl_ctrl:\n      kl_coef: {low: 0.001, high: 0.1}\n"
    with pytest.raises(SearchSpaceError, match="one dotted config path, e.g. `algorithm.kl_ctrl"):
        load_search_space(write(tmp_path, nested))
    for value in ("true", "1", "a: b", "null", "plain"):  # a string choice reads back as the same string
        assert yaml.safe_load(format_override("k", value).split("=", 1)[1]) == value
