"""rla bench: planning, statistics, the report, and (slow) real runs on both backends."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from script_loader import load_script

from agents.bench import BenchSettings, RunSpec, empirical_precision, load_config, plan, validate
from agents.bench_records import iqm, iqm_ci
from agents.bench_report import markdown, summarize
from agents.cli import main
from agents.evaluation import DENSE_LEVELS, frontier_d50
from rla_gym.core import HELDOUT_SEED_START
from rla_gym.curricula import CURRICULA
from rla_gym.evaluation import heldout_seeds


def test_plan_runs_every_strategy_under_env_and_one_fixed_env_run_per_other_mode() -> None:
    settings = BenchSettings(
        envs=("RLA-TextNav-v0", "RLA-Reason-v0"),
        strategies=("uniform", "plr"),
        modes=("policy", "env"),
        seeds=3,
    )
    specs = plan(settings)
    assert len(specs) == 2 * (1 + 2) * 3 and len({s.run_id for s in specs}) == len(specs)
    assert {s.strategy for s in specs if s.mode == "policy"} == {"fixed"}
    assert RunSpec("RLA-Reason-v0", "env", "plr", 2) in specs


@pytest.mark.parametrize("name", sorted(CURRICULA))
def test_training_tasks_never_use_heldout_seeds(name: str) -> None:
    from agents.loop import curriculum_kwargs

    kwargs = {"difficulty": 0.25} if name == "fixed" else curriculum_kwargs(name, 0.5)
    curriculum = CURRICULA[name]("RLA-TextNav-v0", seed=0, **kwargs)
    seeds = {curriculum.next_task(i % 4).seed for i in range(500)}
    assert max(seeds) < HELDOUT_SEED_START <= min(heldout_seeds(50))


def test_iqm_and_its_stratified_interval() -> None:
    assert iqm([0, 1, 2, 3, 4, 5, 6, 100]) == pytest.approx(3.5)  # the outliers are trimmed
    point, low, high = iqm_ci([[0.1, 0.2, 0.3, 0.9], [0.5, 0.6, 0.7, 0.8]])
    assert low <= point <= high and high - low > 0.05
    assert iqm_ci([[0.4, 0.4], [0.4, 0.4, 0.4]]) == pytest.approx((0.4, 0.4, 0.4))
    point, low, high = iqm_ci([[0.1, 0.5], [0.3]])  # one run in a stratum: no interval
    assert point == pytest.approx(0.3) and math.isnan(low) and math.isnan(high)


def test_empirical_precision_grows_with_votes_and_respects_the_bound() -> None:
    from rla_gym.stats import precision_bound

    rng = np.random.default_rng(0)
    a = empirical_precision(np.full(100, 0.8), np.full(100, 0.2), (1, 4, 16, 32), rng)
    assert a == sorted(a) and a[-1] > 0.99
    assert all(value >= precision_bound(1.6, m) for value, m in zip(a, (1, 4, 16, 32), strict=True))
    coin = empirical_precision(np.full(50, 0.5), np.full(50, 0.5), (1, 8), rng)
    # mu = 1: S+ > S- no likelier than S- > S+; strict, so ties (1/2 at m = 1) count against
    assert coin[0] == pytest.approx(0.25, abs=0.03) and coin[1] == pytest.approx(
        (1 - 12870 / 4**8) / 2, abs=0.03
    )


def _run(env: str, mode: str, strategy: str, seed: int, final: dict[str, float], rm: float | None) -> dict:
    start = {level: 0.0 for level in final}
    metrics = None
    if rm is not None:
        metrics = {"process_accuracy": rm, "balanced_accuracy": rm, "outcome_accuracy": rm}
        metrics.update(mu=1.2, precision=[])
    return {
        "spec": {"env": env, "mode": mode, "strategy": strategy, "seed": seed},
        "settings": {"max_difficulty": 0.5},
        "evaluations": [{"step": 0, "success": start}, {"step": 100, "success": final}],
        "rm_before": None if rm is None else {**metrics, "process_accuracy": 0.5},
        "rm_after": metrics,
        "history": [{"step": 50, "loop/difficulty": 0.2, "loop/success": 0.2}]
        + [{"step": 100, "loop/difficulty": 0.3, "loop/success": 0.6}] * 10,
    }


def test_summary_rows_and_markdown_from_run_records() -> None:
    runs = [
        _run("A", "outcome", "fixed", s, {"0.25": 0.2, "0.5": 0.0, "1.0": 0.0}, None) for s in range(3)
    ] + [_run("A", "env", "task-pool", s, {"0.25": 0.8, "0.5": 0.4, "1.0": 0.1}, 0.7) for s in range(3)]
    summary = summarize(runs)
    rows = summary["ablation"]
    assert list(rows) == ["Before training", "Outcome-only", "+ Env"]
    assert rows["+ Env"]["in_domain"][0] == pytest.approx(0.6)
    assert rows["+ Env"]["ood"][0] == pytest.approx(0.1)
    assert rows["Outcome-only"]["in_domain"][0] == pytest.approx(0.1)
    assert rows["Before training"]["in_domain"] == (0.0, 0.0, 0.0)
    assert rows["Before training"]["rm_process_accuracy"] == pytest.approx(0.5)
    assert rows["+ Env"]["rm_process_accuracy"] == pytest.approx(0.7)
    assert summary["strategies"]["task-pool"]["final_train_difficulty"] == pytest.approx(0.3)
    assert summary["strategies"]["task-pool"]["train_success"] == pytest.approx(0.6)  # the last 10 only
    text = markdown(summary)
    assert "| + Env | 0.60 [0.60, 0.60] | 0.10 [0.10, 0.10] | - | 0.700 |" in text  # no references
    assert "| task-pool | 0.60 [0.60, 0.60] | 0.10 [0.10, 0.10] | - | 0.30 | 0.60 | 3 |" in text
    assert "| A | Outcome-only | 0.10 | 0.00 | - | - | - | - | 0.60 |" in text  # records without metrics
    # per env, the Before row: the first evaluation (success 0 everywhere: d50 0, area 0)
    assert "| A | Before training | 0.00 | 0.00 | 0.00 | 0.00 | - | - | - |" in text
    oracle = [_run("A", "oracle", "fixed", s, {"0.25": 0.5, "0.5": 0.1, "1.0": 0.0}, None) for s in range(3)]
    assert list(summarize(runs + oracle)["ablation"])[-1] == "Oracle votes (not the method)"
    fixed_env_only = markdown(summarize(runs[:3]))
    assert "Curriculum strategies" not in fixed_env_only and "| A | Outcome-only |" in fixed_env_only


def test_per_env_rows_carry_the_frontier_and_the_area_normalised_between_random_and_oracle() -> None:
    final = {"0.25": 0.8, "0.5": 0.4, "1.0": 0.1}
    runs = [_run("A", "env", "task-pool", s, final, 0.7) for s in range(2)]
    for run in runs:
        run["metrics"] = {"success": {"d50": 0.375, "auc_difficulty": 0.3667, "auc_learning": 0.25}}
    references = {"A": {"random": {"0.25": 0.2, "0.5": 0.0, "1.0": 0.0}, "oracle": dict.fromkeys(final, 1.0)}}
    cell = summarize(runs, references)["per_env"]["A / + Env"]
    run_area, random_area = (0.15 + 0.125) / 0.75, 0.025 / 0.75  # trapezoids over 0.25, 0.5, 1
    assert cell["auc_normalised"] == pytest.approx((run_area - random_area) / (1 - random_area))
    assert cell["d50"] == 0.375 and cell["auc"] == 0.3667
    text = markdown(summarize(runs, references))
    assert "| A | + Env | 0.60 | 0.10 | 0.38 | 0.37 | 0.34 | 0.25 | 0.60 |" in text
    before = summarize(runs, references)["per_env"]["A / Before training"]
    assert before["auc_normalised"] == pytest.approx(-random_area / (1 - random_area))  # below random
    assert math.isnan(summarize(runs)["per_env"]["A / + Env"]["auc_normalised"])  # no references


def test_summary_does_not_depend_on_the_order_of_the_runs() -> None:
    rng = np.random.default_rng(0)
    runs = [
        _run(env, "env", strategy, s, {"0.25": float(rng.random()), "0.5": 0.0, "1.0": 0.0}, 0.6)
        for env in ("A", "B", "C")
        for strategy in ("plr", "task-pool")
        for s in range(5)
    ]
    shuffled = [runs[i] for i in rng.permutation(len(runs))]
    assert markdown(summarize(shuffled)) == markdown(summarize(runs))


def test_report_can_be_rewritten_from_the_finished_runs(tmp_path: Path, capsys) -> None:
    from agents.bench import write_json_atomic
    from agents.bench_report import main as report_main

    (tmp_path / "runs").mkdir()
    for seed in range(2):
        run = _run("A", "env", "uniform", seed, {"0.25": 0.5, "0.5": 0.25, "1.0": 0.0}, 0.6)
        write_json_atomic(tmp_path / "runs" / f"A__env__uniform__s{seed}.json", run)
    report_main([str(tmp_path)])
    assert "| uniform | 0.38 [0.38, 0.38] |" in capsys.readouterr().out
    assert (tmp_path / "evals.csv").read_text().count("\n") == 1 + 2 * 2 * 3
    assert (tmp_path / "curves.png").exists() and not (tmp_path / "precision.png").exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"seeds": 0}, "seeds must be an integer >= 1, got 0"),
        ({"modes": ("everything",)}, "mode must be one of"),
        ({"strategies": ("magic",)}, "strategy must be one of .* got 'magic'"),
        ({"backend": "slurm"}, "backend must be 'process' or 'ray', got 'slurm'"),
        ({"levels": (0.5, 1.5)}, "level must be in \\[0, 1\\], got 1.5"),
        ({"levels": (0.5, 0.25)}, "levels must increase strictly, got \\(0.5, 0.25\\)"),
        ({"final_eval_episodes": 0}, "final_eval_episodes must be an integer >= 1, got 0"),
        ({"difficulty": 0.8}, "difficulty 0.8 is above max_difficulty 0.5"),
        ({"envs": ("CartPole-v1",)}, "'CartPole-v1' is not an rla-gym environment"),
        ({"envs": ("Nope-v0",)}, "unknown env id 'Nope-v0'; the rla-gym ids are"),
        # a run trains whole rollouts: fewer steps would record a length it did not train
        ({"steps": 10}, "steps must be >= one rollout \\(n_steps \\* n_envs = 1024\\), got 10"),
        ({"steps": 1000, "preset": "lean"}, "steps must be >= one rollout .* = 1024\\), got 1000"),
        ({"steps": 60, "algo": "grpo", "groups": 8, "group_size": 8}, "steps must be >= one round .* = 64"),
        # every planned (env, mode, strategy) is checked, not only the first strategy's
        (
            {"algo": "batched-ppo", "strategies": ("uniform", "plr")},
            "curriculum 'plr' scores episodes with the learner's value estimates: not for algo batched-ppo",
        ),
    ],
)
def test_bad_bench_settings_are_named(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate(BenchSettings(**changes))


def test_config_file_fills_settings_and_flags_win(tmp_path: Path) -> None:
    from agents.cli import build_parser

    config = tmp_path / "bench.toml"
    config.write_text('envs = ["RLA-Reason-v0"]\nseeds = 2\nsteps = 4096\nalgo = "maskable-ppo"\n')
    settings = load_config(BenchSettings(config=str(config), seeds=7))
    assert settings.envs == ("RLA-Reason-v0",) and settings.steps == 4096 and settings.seeds == 7
    # on the command line a flag wins even when it repeats the default
    argv = ["bench", "--config", str(config), "--algo", "ppo", "--seeds", "3"]
    given = set(vars(build_parser(suppress_defaults=True).parse_args(argv)))
    assert given == {"command", "config", "algo", "seeds"}
    settings = load_config(BenchSettings(config=str(config), algo="ppo", seeds=3), given)
    assert (settings.algo, settings.seeds, settings.steps, settings.config) == ("ppo", 3, 4096, "")
    config.write_text("seeds = 2\nspeed = 3\n")
    with pytest.raises(ValueError, match="unknown settings .*'speed'"):
        load_config(BenchSettings(config=str(config)))
    config.write_text("seeds = [2\n")
    with pytest.raises(ValueError, match=r"bench.toml is not valid TOML"):
        load_config(BenchSettings(config=str(config)))
    config.write_text('envs = "RLA-TextNav-v0"\n')
    with pytest.raises(
        ValueError, match=r"envs in .*bench.toml must be a list, e.g. envs = \['RLA-TextNav-v0'\]"
    ):
        load_config(BenchSettings(config=str(config)))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("out = 5", "out in .*bench.toml must be a string, got 5"),
        ('lam = "x"', "lam in .*bench.toml must be a number, got 'x'"),
        ("seeds = 2.5", "seeds in .*bench.toml must be an integer, got 2.5"),
        ("steps = true", "steps in .*bench.toml must be an integer, got True"),
        (
            'levels = [0.5, "hard"]',
            r"levels in .*bench.toml must be a list of float values, got \[0.5, 'hard'\]",
        ),
    ],
)
def test_config_values_of_the_wrong_type_are_named(tmp_path: Path, capsys, line: str, message: str) -> None:
    config = tmp_path / "bench.toml"
    config.write_text(line + "\n")
    with pytest.raises(TypeError, match=message):
        load_config(BenchSettings(config=str(config)))
    assert main(["bench", "--config", str(config), "--out", str(tmp_path / "never")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rla: error:") and "bench.toml must be" in err
    assert not (tmp_path / "never").exists()


TINY = ["--steps", "1024", "--eval-every", "512", "--eval-episodes", "4", "--final-eval-episodes", "6",
        "--n-envs", "2", "--n-steps", "256"]  # fmt: skip


@pytest.mark.slow
def test_rla_bench_runs_reports_resumes_and_survives_a_crash(tmp_path: Path, capsys) -> None:
    # registered here only: the spawned worker cannot make it, so its run crashes there
    gym.register("RLA-OnlyInTheParent-v0", entry_point="rla_gym.envs.textnav:TextNavEnv")
    out = tmp_path / "bench"
    args = ["bench", "--envs", "RLA-TextNav-v0,RLA-OnlyInTheParent-v0", "--strategies", "task-pool",
            "--modes", "outcome", "env", "--seeds", "1", "--out", str(out), *TINY]  # fmt: skip
    assert main(args) == 1
    printed = capsys.readouterr()
    assert "## Ablation" in printed.out and "2 run(s) crashed" in printed.err
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert (
        "RLA-TextNav-v0__env__task-pool__s0.json" in runs
        and "RLA-TextNav-v0__outcome__fixed__s0.json" in runs
    )
    assert "RLA-OnlyInTheParent-v0__env__task-pool__s0.error.txt" in runs
    record = json.loads((out / "runs" / "RLA-TextNav-v0__env__task-pool__s0.json").read_text())
    assert [e["step"] for e in record["evaluations"]] == [0, 512, 1024]
    # the protocol: the dense grid, both policies on the same tasks, more tasks first and last
    assert [e["tasks"] for e in record["evaluations"]] == [6, 4, 6]
    grid = [str(level) for level in DENSE_LEVELS]
    for evaluation in record["evaluations"]:
        assert evaluation["policy"] == "stochastic"
        assert list(evaluation["success"]) == grid and list(evaluation["success_greedy"]) == grid
    final = [record["evaluations"][-1]["success"][level] for level in grid]
    assert record["metrics"]["success"]["d50"] == pytest.approx(frontier_d50(DENSE_LEVELS, final))
    assert set(record["metrics"]["success_greedy"]) == {"d50", "auc_difficulty", "auc_learning"}
    assert record["rm_after"]["precision"] and record["history"]
    for name in ("evals.csv", "summary.json", "summary.md", "curves.png", "difficulty.png", "precision.png"):
        assert (out / name).stat().st_size > 0, name
    assert main(args) == 1  # resume: the finished runs are skipped, the crashed ones retried
    log = json.loads((out / "invocations.json").read_text())
    assert [entry["ran"] for entry in log] == [4, 2] and len(log[1]["crashed"]) == 2
    assert [entry["status"] for entry in log] == ["finished", "finished"]
    assert sorted(log[1]["skipped"]) == [
        "RLA-TextNav-v0__env__task-pool__s0", "RLA-TextNav-v0__outcome__fixed__s0"
    ]  # fmt: skip
    assert "2 finished run(s)" in capsys.readouterr().out


def test_resuming_into_runs_made_with_other_settings_is_refused(tmp_path: Path) -> None:
    from agents.bench import check_resumable, write_json_atomic

    settings = BenchSettings(strategies=("uniform",), seeds=1, out=str(tmp_path))
    (spec,) = plan(settings)
    (tmp_path / "runs").mkdir()
    saved = {k: v for k, v in dataclasses.asdict(settings).items()}
    write_json_atomic(tmp_path / "runs" / f"{spec.run_id}.json", {"settings": saved})
    check_resumable(tmp_path, settings)  # the same settings: fine
    with pytest.raises(ValueError, match="other settings \\(levels, steps"):
        check_resumable(tmp_path, dataclasses.replace(settings, steps=999, levels=(0.5,)))
    del saved["encoder"]  # runs from before the setting existed used the flatten encoder
    write_json_atomic(tmp_path / "runs" / f"{spec.run_id}.json", {"settings": saved})
    check_resumable(tmp_path, settings)
    with pytest.raises(ValueError, match="other settings \\(encoder"):
        check_resumable(tmp_path, dataclasses.replace(settings, encoder="lookup"))


def test_the_auto_preset_gives_each_run_the_settings_of_its_env() -> None:
    """``rla bench``'s default preset: runs on the suite's envs train MaskablePPO; comparing
    strategies alone (modes env) they run the curriculum alone (lambda 0), in an ablation the
    bench's lambda (its + Env row is the full loop); an env outside the suite keeps the bench's
    algo. Other presets still reach the loop, which applies them."""
    from agents.bench import BenchCommandSettings, loop_settings, run_settings
    from agents.loop import apply_preset

    assert BenchCommandSettings().preset == "auto" and BenchSettings().preset == ""  # Python: none
    envs = ("RLA-TextNav-v0", "RLA-GUI-v1", "RLA-Household-v0", "RLA-Reason-v0")
    for modes, tuned_lam in ((("env",), 0.0), (("env", "reward"), 1.0)):
        settings = apply_preset(BenchSettings(preset="auto", envs=envs, modes=modes))
        for spec in plan(dataclasses.replace(settings, seeds=1)):
            loop = loop_settings(settings, spec)
            assert (loop.algo, loop.lam, loop.preset) == ("maskable-ppo", tuned_lam, ""), spec
        validate(settings)
    assert run_settings(settings, RunSpec("RLA-GUI-v1", "env", "uniform", 3)).preset == "auto"  # recorded
    assert run_settings(settings, RunSpec("RLA-Other-v0", "env", "uniform", 3)).algo == "ppo"
    # fast and lean reach the loop, which applies them (a caller may not have)
    spec = RunSpec("RLA-TextNav-v0", "env", "uniform", 0)
    fast = apply_preset(loop_settings(BenchSettings(preset="fast"), spec))
    assert (fast.vec_env, fast.n_envs, fast.encoder) == ("batched", 128, "flatten-small")


def test_a_config_file_counts_as_given_in_python_as_on_the_command_line(tmp_path: Path) -> None:
    """``bench()`` resolves settings as ``rla bench`` does: a file's ``algo = "ppo"`` keeps PPO
    under auto, and a file's ``preset = ""`` overrides ``BenchCommandSettings``' auto."""
    from agents.bench import BenchCommandSettings, resolve_settings

    ppo = tmp_path / "ppo.toml"
    ppo.write_text('envs = ["RLA-GUI-v1"]\npreset = "auto"\nalgo = "ppo"\n')
    plain = tmp_path / "plain.toml"
    plain.write_text('envs = ["RLA-GUI-v1"]\npreset = ""\n')
    for config in (ppo, plain):
        for cls in (BenchSettings, BenchCommandSettings):
            settings = resolve_settings(cls(config=str(config)))
            assert (type(settings), settings.preset, settings.algo) == (cls, "", "ppo"), (config.name, cls)
    auto = resolve_settings(BenchCommandSettings(envs=("RLA-GUI-v1",)))
    assert (auto.preset, auto.algo) == ("auto", "ppo")  # the runs resolve it: MaskablePPO on the GUI


def test_resuming_under_auto_compares_each_run_with_its_env(tmp_path: Path) -> None:
    from agents.bench import check_resumable, run_settings, write_json_atomic
    from agents.loop import apply_preset

    envs = ("RLA-TextNav-v0", "RLA-GUI-v1")
    settings = apply_preset(
        BenchSettings(preset="auto", envs=envs, strategies=("uniform",), seeds=1, out=str(tmp_path))
    )
    (tmp_path / "runs").mkdir()
    for spec in plan(settings):
        made = dataclasses.asdict(run_settings(settings, spec))
        record = {"spec": dataclasses.asdict(spec), "settings": made}
        write_json_atomic(tmp_path / "runs" / f"{spec.run_id}.json", record)
    check_resumable(tmp_path, settings)  # each run made with its env's settings: fine
    plain = dataclasses.replace(settings, preset="")
    with pytest.raises(
        ValueError, match=r"\(algo, lam, e.g. RLA-GUI-v1.*auto: leave out --preset and --algo\)"
    ):
        check_resumable(tmp_path, plain)
    with pytest.raises(ValueError, match=r"auto: leave out --preset, --algo and --lam\)"):  # lam too
        check_resumable(tmp_path, dataclasses.replace(plain, lam=0.5))
    paths = sorted((tmp_path / "runs").glob("*.json"))

    def remake(settings_of: Any) -> None:  # every run's record, as made with settings_of(spec)
        for path in paths:
            known = json.loads(path.read_text())["spec"]
            made = dataclasses.asdict(settings_of(RunSpec(**known)))
            write_json_atomic(path, {"spec": known, "settings": made})

    for made, hint in ((plain, "add --preset ''"), (dataclasses.replace(plain, algo="a2c"), None)):
        remake(lambda _, made=made: made)
        with pytest.raises(ValueError, match=r"other settings \(algo, lam, e.g. RLA-GUI-v1") as error:
            check_resumable(tmp_path, settings)
        message = str(error.value)
        assert (hint in message) if hint else "preset" not in message  # only a fix that works
    remake(lambda _: plain)
    check_resumable(tmp_path, plain)  # --preset '' resumes runs made without auto
    remake(lambda spec: run_settings(settings, spec) if spec.env == "RLA-TextNav-v0" else plain)
    with pytest.raises(ValueError, match=r"\(algo, lam, e.g. RLA-GUI-v1") as error:  # a mixed folder
        check_resumable(tmp_path, settings)
    assert "preset" not in str(error.value)  # neither choice resumes every run: no hint


@pytest.mark.slow
def test_rla_bench_trains_each_env_with_its_auto_settings(tmp_path: Path) -> None:
    """By default (``--preset auto``) GUI runs train MaskablePPO and record it: in an ablation at
    the bench's lambda (mode env/fixed is still + Reward's twin, copied), comparing strategies
    at lambda 0, which the report names; a resume with other settings is refused."""
    out = tmp_path / "bench"
    args = ["bench", "--envs", "RLA-GUI-v1", "--strategies", "fixed", "--modes", "reward", "env",
            "--seeds", "1", "--out", str(out), *TINY]  # fmt: skip
    assert main(args) == 0
    (entry,) = json.loads((out / "invocations.json").read_text())
    assert (entry["ran"], entry["copied"]) == (1, ["RLA-GUI-v1__env__fixed__s0"])
    assert (entry["settings"]["preset"], entry["auto"]) == (
        "auto",
        {"RLA-GUI-v1": {"algo": "maskable-ppo", "lam": 1.0}},
    )
    record = json.loads((out / "runs" / "RLA-GUI-v1__reward__fixed__s0.json").read_text())
    assert (record["settings"]["algo"], record["settings"]["lam"], record["settings"]["preset"]) == (
        "maskable-ppo", 1.0, "auto"
    )  # fmt: skip
    assert "## Curriculum strategies under the full loop" in (out / "summary.md").read_text()
    assert main(args) == 0  # resumes: every run is kept
    assert json.loads((out / "invocations.json").read_text())[1]["ran"] == 0
    assert main([*args, "--preset", ""]) == 2  # runs made with MaskablePPO: refused
    alone = tmp_path / "alone"  # strategies alone: the curriculum alone, and the report says so
    args = ["bench", "--envs", "RLA-GUI-v1", "--strategies", "uniform", "--seeds", "1",
            "--out", str(alone), *TINY]  # fmt: skip
    assert main(args) == 0
    record = json.loads((alone / "runs" / "RLA-GUI-v1__env__uniform__s0.json").read_text())
    assert (record["settings"]["algo"], record["settings"]["lam"]) == ("maskable-ppo", 0.0)
    summary = (alone / "summary.md").read_text()
    assert "## Curriculum strategies\n" in summary and "(0: the curriculum alone): RLA-GUI-v1 0." in summary


@pytest.mark.parametrize(
    ("name", "value"),
    [("final_eval_episodes", 100), ("prm_hidden", 64), ("prm_embed_dim", 8), ("history", 1)],
)
def test_every_setting_a_run_measures_with_is_compared_on_resume(tmp_path: Path, name: str, value) -> None:
    """The final evaluation's tasks, the PRM's size and the history change what a run measures:
    runs made with others, planned now or not (they share references.json), are refused; a run
    from before the setting existed counts as made with the value runs then used."""
    from agents.bench import check_resumable, write_json_atomic

    settings = BenchSettings(strategies=("uniform",), seeds=1, out=str(tmp_path))
    (tmp_path / "runs").mkdir()
    saved = dataclasses.asdict(settings)
    other_seed = tmp_path / "runs" / "RLA-TextNav-v0__env__uniform__s7.json"  # not in this plan
    write_json_atomic(other_seed, {"settings": saved})
    check_resumable(tmp_path, settings)
    with pytest.raises(ValueError, match=f"other settings \\({name}, e.g. {other_seed.name}"):
        check_resumable(tmp_path, dataclasses.replace(settings, **{name: value}))
    del saved[name]
    write_json_atomic(other_seed, {"settings": {**saved, "eval_episodes": 200}})
    older = dataclasses.replace(settings, eval_episodes=200)  # the final evaluation used these
    check_resumable(tmp_path, older)  # the values runs were made with before the setting existed
    with pytest.raises(ValueError, match=f"other settings \\({name}"):
        check_resumable(tmp_path, dataclasses.replace(older, **{name: value}))


def test_a_rerun_with_other_final_evaluation_rewrites_nothing(tmp_path: Path, capsys) -> None:
    """references.json normalises the finished runs: a rerun that would remake it with other
    settings is refused before anything is written."""
    from agents.bench import write_json_atomic

    out = tmp_path / "bench"
    (out / "runs").mkdir(parents=True)
    settings = BenchSettings(strategies=("uniform",), seeds=1, levels=(0.5,), final_eval_episodes=4)
    write_json_atomic(
        out / "runs" / "RLA-TextNav-v0__env__uniform__s0.json", {"settings": dataclasses.asdict(settings)}
    )
    (out / "references.json").write_text('{"RLA-TextNav-v0": {"tasks": 4}}')
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    args = ["bench", "--strategies", "uniform", "--seeds", "1", "--levels", "0.5", "--out", str(out)]
    assert main([*args, "--final-eval-episodes", "8"]) == 2
    assert "other settings (final_eval_episodes" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    ("name", "remedy"),
    [
        ("runs/RLA-TextNav-v0__env__uniform__s0.json", "delete it to run that run again"),
        ("invocations.json", "move it aside to start a new log"),
        ("references.json", "delete it and rerun"),
    ],
)
def test_a_json_file_that_is_not_valid_is_named(tmp_path: Path, capsys, name: str, remedy: str) -> None:
    out = tmp_path / "bench"
    (out / "runs").mkdir(parents=True)
    (out / name).write_text('{"settings": {"steps": 10')  # truncated
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    args = ["bench", "--strategies", "uniform", "--seeds", "1", "--levels", "0.5", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rla: error: {out / name} is not valid JSON (") and remedy in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_an_out_that_is_a_file_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "results").write_text("mine\n")
    assert main(["bench", "--seeds", "1", "--out", str(tmp_path / "results")]) == 2
    assert "is a file, not a directory; choose another --out" in capsys.readouterr().err
    assert (tmp_path / "results").read_text() == "mine\n"


def test_rla_bench_exits_non_zero_naming_the_runs_that_crashed(tmp_path: Path, capsys) -> None:
    """The other runs finish and the report is written; then the exit status says it, and the
    last line names the failed runs and where their errors are."""
    # registered here only: the spawned worker cannot make it, so its run crashes there
    gym.register("RLA-OnlyInTheParent-v0", entry_point="rla_gym.envs.textnav:TextNavEnv")
    out = tmp_path / "bench"
    args = ["bench", "--envs", "RLA-OnlyInTheParent-v0", "--modes", "outcome", "--seeds", "1", "--workers",
            "1", "--levels", "0.5", "--out", str(out), *TINY]  # fmt: skip
    try:
        assert main(args) == 1
    finally:
        del gym.registry["RLA-OnlyInTheParent-v0"]
    captured = capsys.readouterr()
    run_id = "RLA-OnlyInTheParent-v0__outcome__fixed__s0"
    assert "## Ablation" in captured.out and (out / "summary.md").exists()
    assert captured.err.strip().splitlines()[-1] == (
        f"rla: error: 1 run(s) crashed: {run_id}; their errors are in {out / 'runs' / '<id>.error.txt'}; "
        "rerun the same command to retry them (finished runs are kept)"
    )
    assert "NameNotFound" in (out / "runs" / f"{run_id}.error.txt").read_text()


def test_ctrl_c_in_rla_bench_says_how_to_continue(tmp_path: Path, monkeypatch, capsys) -> None:
    import agents.bench as module

    def interrupted(settings, pending, bar):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "_run_processes", interrupted)
    out = tmp_path / "bench"
    args = ["bench", "--strategies", "uniform", "--seeds", "1", "--levels", "0.5", "--final-eval-episodes",
            "2", "--out", str(out)]  # fmt: skip
    assert main(args) == 130
    err = capsys.readouterr().err.strip()
    assert err.splitlines()[-1] == (
        f"rla: interrupted; the finished runs are kept in {out}: rerun the same command to continue"
    )
    assert "Traceback" not in err
    assert [entry["status"] for entry in json.loads((out / "invocations.json").read_text())] == [
        "interrupted"
    ]


@pytest.mark.slow
def test_ray_backend_runs_the_same_runs_locally(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    out = tmp_path / "bench"
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        args = [
            "bench",
            "--backend",
            "ray",
            "--strategies",
            "uniform",
            "--seeds",
            "2",
            "--out",
            str(out),
            *TINY,
        ]
        assert main(args) == 0
    finally:
        ray.shutdown()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["strategies"]["uniform"]["runs"] == 2


def test_rla_bench_runs_the_group_trainer(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    args = ["bench", "--envs", "RLA-TextNav-v0", "--strategies", "task-pool-fresh", "--modes", "noisy-oracle",
            "env", "--seeds", "1", "--out", str(out), "--algo", "grpo", "--groups", "2", "--group-size", "4",
            "--mu", "1.8", *TINY]  # fmt: skip
    assert main(args) == 0
    record = json.loads((out / "runs" / "RLA-TextNav-v0__env__task-pool-fresh__s0.json").read_text())
    assert record["settings"]["algo"] == "grpo" and record["settings"]["groups"] == 2
    assert record["evaluations"][-1]["step"] >= 1024 and record["history"]
    assert (out / "runs" / "RLA-TextNav-v0__noisy-oracle__fixed__s0.json").exists()


def test_the_full_loop_at_the_fixed_level_is_copied_from_the_reward_run(tmp_path: Path) -> None:
    """Mode env with the fixed strategy is + Reward step for step: the bench runs + Reward once
    and copies it, and training that twin for real gives the same record."""
    from agents.bench import run_one, same_run_as

    out = tmp_path / "bench"
    args = ["bench", "--envs", "RLA-TextNav-v0", "--strategies", "fixed", "--modes", "reward", "env",
            "--seeds", "1", "--out", str(out), "--algo", "maskable-grpo", "--groups", "2",
            "--group-size", "4", *TINY]  # fmt: skip
    assert main(args) == 0
    (entry,) = json.loads((out / "invocations.json").read_text())
    assert entry["ran"] == 1 and entry["copied"] == ["RLA-TextNav-v0__env__fixed__s0"]
    source = json.loads((out / "runs" / "RLA-TextNav-v0__reward__fixed__s0.json").read_text())
    copy = json.loads((out / "runs" / "RLA-TextNav-v0__env__fixed__s0.json").read_text())
    assert copy["copy_of"] == "RLA-TextNav-v0__reward__fixed__s0"
    assert copy["spec"] == {"env": "RLA-TextNav-v0", "mode": "env", "strategy": "fixed", "seed": 0}
    assert copy["evaluations"] == source["evaluations"] and copy["history"] == source["history"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["strategies"]["fixed"]["runs"] == 1  # the copy is the full loop's fixed row
    # the premise: the twin, trained for real, repeats the + Reward run
    saved = {k: tuple(v) if isinstance(v, list) else v for k, v in source["settings"].items()}
    settings = BenchSettings(**saved, out=str(out))
    twin = RunSpec("RLA-TextNav-v0", "env", "fixed", 0)
    assert same_run_as(twin, plan(settings)) == RunSpec("RLA-TextNav-v0", "reward", "fixed", 0)
    assert same_run_as(RunSpec("RLA-TextNav-v0", "env", "uniform", 0), plan(settings)) is None
    real = json.loads(json.dumps(run_one(settings, twin)))
    assert real["evaluations"] == source["evaluations"] and real["history"] == source["history"]
    assert real["rm_after"] == source["rm_after"]
    assert any(e["success"]["0.0"] > 0 for e in real["evaluations"])  # the records carry signal


def test_bench_workers_die_with_their_parent(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import multiprocessing, os, time
            from agents.bench import _exit_with_parent

            def child(parent):
                _exit_with_parent(parent, interval=0.1)
                time.sleep(60)

            if __name__ == "__main__":
                process = multiprocessing.get_context("spawn").Process(target=child, args=(os.getpid(),))
                process.start()
                print(process.pid, flush=True)
                time.sleep(60)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    time.sleep(1.0)  # the child is up and watching
    parent.kill()  # SIGKILL: the parent cannot clean up
    parent.wait()

    def alive(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return False
        return "\nState:\tZ" not in state

    deadline = time.time() + 10
    while alive(child) and time.time() < deadline:
        time.sleep(0.1)
    assert not alive(child), "the worker outlived its killed parent"


def test_bench_runs_take_a_history() -> None:
    from agents.bench import loop_settings

    settings = BenchSettings(algo="maskable-ppo", history=1)
    assert loop_settings(settings, RunSpec("RLA-TextNav-v0", "outcome", "fixed", 0)).history == 1
    with pytest.raises(ValueError, match="history must be an integer >= 0"):
        validate(dataclasses.replace(settings, history=-1))


def test_references_record_the_env_version_and_are_remade_for_another(tmp_path: Path) -> None:
    import rla_gym
    from agents.bench import write_references

    settings = BenchSettings(envs=("RLA-TextNav-v0",), levels=(0.0, 0.5), final_eval_episodes=20)
    entry = write_references(tmp_path, settings)["RLA-TextNav-v0"]
    assert entry["rla_gym"] == rla_gym.__version__ and entry["tasks"] == 20
    assert entry["oracle"] == {"0.0": 1.0, "0.5": 1.0} and 0 <= entry["random"]["0.5"] < 1
    stale = {"RLA-TextNav-v0": {**entry, "rla_gym": "0.0.1", "random": {"0.0": -1.0, "0.5": -1.0}}}
    (tmp_path / "references.json").write_text(json.dumps(stale))
    assert write_references(tmp_path, settings)["RLA-TextNav-v0"] == entry  # made again
    assert json.loads((tmp_path / "references.json").read_text())["RLA-TextNav-v0"] == entry


@pytest.mark.parametrize("config", sorted(Path(__file__).parent.parent.glob("benchmarks/study/*.toml")))
def test_the_study_configs_are_valid_bench_settings(config: Path) -> None:
    """Each committed study config (docs/results.md) loads, validates and plans its rows."""
    settings = load_config(BenchSettings(config=str(config)))
    validate(settings)
    specs = plan(settings)
    assert settings.seeds >= 10 and settings.history == 1 and settings.preset == "fast"
    assert settings.out == f"benchmarks/results/study/{config.stem}"
    rows = {(spec.mode, spec.strategy) for spec in specs}
    assert {("outcome", "fixed"), ("policy", "fixed"), ("reward", "fixed"), ("env", "task-pool")} <= rows
    assert len(specs) == settings.seeds * len(rows)


@pytest.mark.parametrize(
    ("folder", "strategies"),
    [
        ("textnav-grpo", True), ("textnav-ppo", False), ("reason-grpo", True), ("reason-ppo", False),
        ("household-grpo", True), ("household-ppo", False), ("gui-grpo", True), ("gui-ppo", False),
    ],
)  # fmt: skip
def test_the_results_page_tables_come_from_the_committed_runs(
    folder: str, strategies: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks/study/page_tables.py regenerates the page's tables from the run files:
    every ablation row it prints, and every strategy row where the page has the folder's
    strategies, is on docs/results.md as it stands."""
    root = Path(__file__).parent.parent
    page_tables = load_script("benchmarks/study/page_tables.py")
    page_tables.main([str(root / "benchmarks/results/study" / folder), "--vs", "Policy:Outcome-only"])
    printed = capsys.readouterr().out
    page = (root / "docs/results.md").read_text()
    ablation = printed.split("## Ablation")[1].split("## Pre-declared")[0]
    rows = [line for line in ablation.splitlines() if line.startswith("| ") and "[" in line]
    assert len(rows) == 7 and all(row in page for row in rows), [row for row in rows if row not in page]
    if strategies:
        table = printed.split("## Strategies under the full loop")[1].split("## Final")[0]
        lines = [line for line in table.splitlines() if line.startswith("| ") and "[" in line]
        assert len(lines) == 9 and all(row in page for row in lines)
    with pytest.raises(ValueError, match="--vs takes \"X:Y\", got 'Policy'"):
        page_tables.main([str(root / "benchmarks/results/study" / folder), "--vs", "Policy"])


def test_the_results_page_pairs_a_variant_folder_with_the_study(capsys: pytest.CaptureFixture[str]) -> None:
    """``page_tables.py --with`` pairs a variant's runs (its own folder) seed by seed with the
    study's rows, and refuses a folder of another env."""
    root = Path(__file__).parent.parent
    page_tables = load_script("benchmarks/study/page_tables.py")
    study, variant = (
        root / "benchmarks/results/study/gui-grpo",
        root / "benchmarks/results/variants/gui-grpo-potential",
    )
    potential = "Oracle progress (not the method)"
    page_tables.main([str(study), "--with", str(variant), "--vs", f"{potential}:Outcome-only"])
    table = capsys.readouterr().out.split("## Not pre-declared")[1]
    seeds = len(list((variant / "runs").glob("*.json")))
    assert f"| {potential} vs Outcome-only | {seeds} | " in table
    page_tables.main([str(study), "--vs", f"{potential}:Outcome-only"])  # without it: no such row
    assert f"| {potential} vs" not in capsys.readouterr().out
    with pytest.raises(ValueError, match="holds runs of \\['RLA-Reason-v0'\\]"):
        page_tables.main(
            [str(study), "--with", str(root / "benchmarks/results/study/reason-ppo"), "--vs", "Policy:+ Env"]
        )


def test_a_plugin_in_the_working_directory_adds_a_strategy(tmp_path: Path, monkeypatch, capsys) -> None:
    """``rla bench --plugins my_module`` imports ``my_module.py`` from the working directory, as
    ``python -m`` would (the ``rla`` script does not put it on sys.path), in the parent and in
    each spawned worker; the strategy it registers runs; a module found nowhere is named."""
    import sys

    (tmp_path / "my_plugin_curricula.py").write_text(
        "from rla_gym.curricula import CURRICULA, FixedCurriculum\n\n\n"
        "class EasyOnly(FixedCurriculum):\n"
        "    def __init__(self, env_id, *, bounds=(0.0, 1.0), seed=0):\n"
        "        super().__init__(env_id, 0.0, seed=seed)\n\n\n"
        'CURRICULA["easy-only"] = EasyOnly\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    for registry, key in ((CURRICULA, "easy-only"), (sys.modules, "my_plugin_curricula")):
        monkeypatch.setitem(registry, key, None)  # so that the test's end removes what the plugin adds
        monkeypatch.delitem(registry, key)
    args = ["bench", "--envs", "RLA-TextNav-v0", "--strategies", "easy-only", "--modes", "env", "--seeds",
            "1", "--out", str(tmp_path / "bench"), "--plugins", "my_plugin_curricula", *TINY]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    record = json.loads((tmp_path / "bench" / "runs" / "RLA-TextNav-v0__env__easy-only__s0.json").read_text())
    assert record["history"] and {row["loop/difficulty"] for row in record["history"]} == {0.0}
    missing = [*args[: -len(TINY) - 1], "not_a_plugin_here", *TINY]
    missing[missing.index("--out") + 1] = str(tmp_path / "other")
    assert main(missing) == 2
    assert "plugin module 'not_a_plugin_here' not found in the working directory" in capsys.readouterr().err


def test_run_processes_start_with_ctrl_c_ignored() -> None:
    """A run's process ignores Ctrl-C from its first instruction (the parent ends it), so none
    prints a traceback while it starts up; the parent's own handler is back afterwards."""
    import multiprocessing
    import signal
    import time

    from agents.bench import _start_ignoring_ctrl_c

    before = signal.getsignal(signal.SIGINT)
    process = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(3,))
    _start_ignoring_ctrl_c(process)
    try:
        assert signal.getsignal(signal.SIGINT) is before
        os.kill(process.pid, signal.SIGINT)  # while it starts up: the moment a traceback came from
        time.sleep(0.5)
        os.kill(process.pid, signal.SIGINT)
        process.join(1.0)
        assert process.is_alive()  # a KeyboardInterrupt would have ended it
    finally:
        process.terminate()
        process.join()


def test_ctrl_c_ends_the_runs_under_way(tmp_path: Path, monkeypatch) -> None:
    """The parent's Ctrl-C ends its run processes (the runs stay pending) instead of waiting for
    them at exit."""
    import multiprocessing
    import types

    import agents.bench as module

    def ctrl_c(seconds: float) -> None:
        raise KeyboardInterrupt

    settings = BenchSettings(strategies=("uniform",), seeds=1, workers=1, out=str(tmp_path))
    (tmp_path / "runs").mkdir()
    monkeypatch.setattr(module, "time", types.SimpleNamespace(sleep=ctrl_c))
    with pytest.raises(KeyboardInterrupt):
        module._run_processes(settings, plan(settings), bar=None)
    assert multiprocessing.active_children() == []
    assert list((tmp_path / "runs").iterdir()) == []


def test_ctrl_c_on_rla_bench_prints_one_line(tmp_path: Path) -> None:
    """Ctrl-C on ``rla bench`` while its runs train: exit status 130 and the one line saying how
    to continue, nothing else (the run processes, ended by SIGTERM, exit through multiprocessing's
    cleanup: no traceback, no "leaked semaphore" warning from the resource tracker)."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "bench"
    command = [sys.executable, "-m", "agents.cli", "bench", "--strategies", "uniform", "--seeds", "2",
               "--steps", "500000", "--out", str(out)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60  # until both runs train (their processes started, evaluated)
        while time.monotonic() < deadline and not (out / "invocations.json").exists():
            time.sleep(0.2)
        time.sleep(10)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130, err
    expected = f"rla: interrupted; the finished runs are kept in {out}: rerun the same command to continue\n"
    assert err.replace("\r", "\n").splitlines()[-1] + "\n" == expected and "Traceback" not in err
    assert "leaked" not in err and "Warning" not in err, err
    assert list((out / "runs").glob("*.json")) == []  # both runs stay pending
