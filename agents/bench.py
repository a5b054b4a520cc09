"""``rla bench``: independent closed-loop runs over envs x modes x strategies x seeds.

Every run trains with :func:`agents.loop.build_loop` and is evaluated greedily every
``eval_every`` steps (and before training) on held-out task seeds at fixed ``levels``;
training stays within [0, ``max_difficulty``], so the levels above it are the
out-of-distribution tier. At the end, the run's PRM is scored on held-out oracle/random
trajectories against the exact step labels, with the empirical precision A(m) beside
Theorem 1's bound. Each run writes ``runs/<id>.json`` atomically; a re-run skips finished
runs, a crashed run leaves ``runs/<id>.error.txt`` and the others go on. The full loop with the
fixed strategy repeats the + Reward run of its env and seed step for step, so it is written as
a copy of that run (:func:`same_run_as`).
:mod:`agents.bench_report` turns the run files into CSV, JSON, markdown and PNGs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import signal
import threading
import time
import tomllib
import traceback
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.atomic import read_json, write_text_atomic
from agents.evaluation import DENSE_LEVELS
from agents.fields import described, noted
from agents.loop import (
    ALGOS,
    BENCH_AUTO_PRESETS,
    LoopSettings,
    apply_preset,
    check_steps,
    from_loop,
    validate_settings,
)
from agents.loop_runtime import MODE_FLAGS, MODES
from rla_gym.core import HELDOUT_SEED_START, check_difficulty

#: Ablation rows below the full loop train at a fixed difficulty, so they run one strategy.
FIXED_ENV_MODES = ("outcome", "policy", "reward", "rm-only", "oracle", "noisy-oracle", "oracle-potential")
#: History keys kept in the run files (the loop logs more).
HISTORY_KEYS = (
    "loop/success", "loop/difficulty", "rm/mu", "rm/p_plus", "rm/p_minus", "rm/balance",
    "rm/auc", "rm/balanced_accuracy", "curriculum/accepted", "curriculum/rejected",
)  # fmt: skip
PRECISION_M = (1, 2, 4, 8, 16, 32)
#: Settings that change what a run measures: resuming into runs made with others is refused
#: (every field of :class:`BenchSettings` that reaches a run but the plan's axes and the execution).
RUN_SETTINGS = (
    "steps", "eval_every", "eval_episodes", "final_eval_episodes", "levels", "max_difficulty",
    "difficulty", "algo", "encoder", "objective", "lam", "process_scale", "mu", "prm_epochs", "prm_replay",
    "prm_embed_dim", "prm_hidden", "n_envs", "n_steps", "group_size", "groups", "group_filter", "vec_env",
    "batch_size", "n_epochs", "ent_coef", "learning_rate", "history",
)  # fmt: skip
#: Run settings added after runs were committed: a run without the key was made with this value
#: (the PRM's size was its constructor's defaults; there was no history).
UNSAVED_DEFAULTS = {
    "encoder": "flatten", "prm_epochs": 1, "prm_replay": 1, "mu": 1.5, "group_size": 8, "groups": 8,
    "group_filter": "all", "vec_env": "dummy", "batch_size": 0, "n_epochs": 10, "ent_coef": 0.0,
    "learning_rate": 0.0, "prm_embed_dim": 16, "prm_hidden": 128, "history": 0,
}  # fmt: skip
#: Run settings that took another's value before they existed: a run without
#: ``final_eval_episodes`` evaluated on ``eval_episodes`` tasks per level every time.
UNSAVED_SAME_AS = {"final_eval_episodes": "eval_episodes"}
#: Held-out RM trajectories use task seeds from here on (policy evaluation uses the start).
RM_SEED_OFFSET = 1_000_000


@dataclasses.dataclass
class BenchSettings:
    """Benchmark curriculum strategies and ablation modes: independent runs, held-out evaluation."""

    envs: tuple[str, ...] = described(("RLA-TextNav-v0",), "registered env ids")
    strategies: tuple[str, ...] = described(
        ("fixed", "uniform", "success-band", "rm-balance", "task-pool", "plr", "learning-progress",
         "learnability"),
        "curricula compared under mode env",
    )  # fmt: skip
    modes: tuple[str, ...] = described(
        ("env",), "loop modes (env runs every strategy; the others train at --difficulty)"
    )
    seeds: int = described(5, "seeds per (env, mode, strategy)")
    steps: int = described(50_000, "env steps per run")
    eval_every: int = described(10_000, "env steps between evaluations")
    eval_episodes: int = described(50, "held-out tasks per level in the evaluations during training")
    final_eval_episodes: int = described(200, "held-out tasks per level in the final evaluation")
    levels: tuple[float, ...] = described(DENSE_LEVELS, "evaluation difficulties")
    max_difficulty: float = from_loop("max_difficulty", 0.5)
    difficulty: float = from_loop("difficulty", 0.25)
    algo: str = from_loop("algo", "ppo")
    encoder: str = from_loop("encoder")
    objective: str = from_loop("objective")
    lam: float = from_loop("lam")
    process_scale: str = from_loop("process_scale")
    mu: float = from_loop("mu")
    prm_epochs: int = from_loop("prm_epochs")
    prm_replay: int = from_loop("prm_replay")
    prm_embed_dim: int = from_loop("prm_embed_dim")
    prm_hidden: int = from_loop("prm_hidden")
    group_size: int = from_loop("group_size")
    groups: int = from_loop("groups")
    group_filter: str = from_loop("group_filter")
    n_envs: int = from_loop("n_envs")
    vec_env: str = from_loop("vec_env")
    batch_size: int = from_loop("batch_size")
    n_epochs: int = from_loop("n_epochs")
    ent_coef: float = from_loop("ent_coef")
    learning_rate: float = from_loop("learning_rate")
    n_steps: int = from_loop("n_steps")
    preset: str = from_loop("preset")
    history: int = from_loop("history")
    out: str = described("results/bench", "results directory")
    backend: str = described("process", "process (local pool) or ray")
    workers: int = described(2, "runs at a time (process backend; local Ray CPUs)")
    ray_address: str = described("", "Ray cluster address ('' starts a local Ray)")
    config: str = described("", "TOML or JSON file with any of these settings (flags win)")
    plugins: tuple[str, ...] = described((), "modules to import first in every run (e.g. to add strategies)")


@dataclasses.dataclass
class BenchCommandSettings(BenchSettings):
    """``rla bench``'s settings: :class:`BenchSettings` with the ``auto`` preset by default."""

    algo: str = noted(
        BenchSettings, "algo", "under --preset auto, the default: maskable-ppo on the suite's envs"
    )
    lam: float = noted(BenchSettings, "lam", "under --preset auto, the default: 0 when --modes is env alone")

    preset: str = described(
        "auto",
        "settings bundle: auto (the default: without --algo, every run on the suite's envs trains "
        "MaskablePPO, and with --modes env alone at lambda 0, the curriculum alone), fast (PPO on 128 "
        "batched envs), lean (the lean batched-ppo), '' (none: --algo, default ppo); flags given "
        "with it win",
    )


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One independent run."""

    env: str
    mode: str
    strategy: str
    seed: int

    @property
    def run_id(self) -> str:
        return f"{self.env}__{self.mode}__{self.strategy}__s{self.seed}"


def read_settings_file(path: str | Path, cls: type = BenchSettings) -> dict[str, Any]:
    """The settings in a TOML (``.toml``) or JSON file, checked against the fields of ``cls``."""
    path = Path(path)
    text = path.read_text()
    try:
        values = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{path} is not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {error}"
        ) from error
    if not isinstance(values, dict):
        raise ValueError(f"{path} must hold a table of settings, got {type(values).__name__}")
    fields = {f.name for f in dataclasses.fields(cls)} - {"config"}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ValueError(f"unknown settings in {path}: {unknown}")
    hints = typing.get_type_hints(cls)
    for key, value in values.items():
        _check_setting_type(key, value, hints[key], path)
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def _is_kind(value: Any, kind: Any) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return not isinstance(kind, type) or isinstance(value, kind)  # other hints: not checked here


def _check_setting_type(key: str, value: Any, hint: Any, path: Path) -> None:
    """Raise naming ``key`` when a settings file gives it a value of the wrong type."""
    if typing.get_origin(hint) is tuple:
        (kind, *_) = typing.get_args(hint)
        if isinstance(value, str):  # envs = "RLA-TextNav-v0" would be read letter by letter
            raise ValueError(f"{key} in {path} must be a list, e.g. {key} = [{value!r}], got {value!r}")
        if not isinstance(value, list) or not all(_is_kind(item, kind) for item in value):
            raise TypeError(f"{key} in {path} must be a list of {kind.__name__} values, got {value!r}")
    elif not _is_kind(value, hint):
        raise TypeError(f"{key} in {path} must be {_KIND_NAMES.get(hint, hint.__name__)}, got {value!r}")


def load_config(settings: BenchSettings, given: set[str] | None = None) -> BenchSettings:
    """Fill settings from ``settings.config``: the fields named in ``given`` keep their value and
    the others take the file's. ``given=None`` (the Python API) treats every field still at its
    default as not given; the command line passes the flags it saw."""
    if not settings.config:
        return settings
    values = read_settings_file(settings.config, type(settings))
    merged = {}
    for f in dataclasses.fields(settings):
        mine = getattr(settings, f.name)
        explicit = f.name in given if given is not None else mine != f.default
        merged[f.name] = values[f.name] if f.name in values and not explicit else mine
    return type(settings)(**{**merged, "config": ""})


def import_plugins(settings: BenchSettings) -> None:
    """Import ``settings.plugins``: modules that register strategies or envs on import. Every
    run imports them again, since spawned workers and Ray tasks start from a fresh interpreter.

    As with ``python -m``, a module in the working directory imports (the ``rla`` script does
    not put that directory on ``sys.path`` itself); a module found nowhere raises naming it."""
    import importlib
    import os
    import sys

    here = os.getcwd()
    if settings.plugins and here not in sys.path:
        sys.path.append(here)  # after the installed packages: a plugin cannot shadow one
    for module in settings.plugins:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name is None or not (module == error.name or module.startswith(error.name + ".")):
                raise  # the plugin itself imports something missing: its own message says what
            raise ModuleNotFoundError(
                f"plugin module {module!r} not found in the working directory ({here}) or on "
                "sys.path: run rla bench from the directory that holds it, or add that directory "
                "to PYTHONPATH",
                name=module,
            ) from error


def validate(settings: BenchSettings) -> None:
    """Raise naming the bad value, before any run starts."""
    from rla_gym.curricula import CURRICULA

    import_plugins(settings)
    counts = ("seeds", "steps", "eval_every", "eval_episodes", "final_eval_episodes", "workers")
    for name in (*counts, "n_envs", "n_steps"):
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if not settings.envs or not settings.modes or not settings.levels:
        raise ValueError("envs, modes and levels must each name at least one value")
    for mode in settings.modes:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    for strategy in settings.strategies:
        if strategy not in CURRICULA:
            raise ValueError(f"strategy must be one of {sorted(CURRICULA)}, got {strategy!r}")
    if "env" in settings.modes and not settings.strategies:
        raise ValueError("mode env needs at least one strategy")
    if settings.algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got {settings.algo!r}")
    if settings.backend not in ("process", "ray"):
        raise ValueError(f"backend must be 'process' or 'ray', got {settings.backend!r}")
    for level in settings.levels:
        check_difficulty(level, "level")
    if any(b <= a for a, b in zip(settings.levels[:-1], settings.levels[1:], strict=True)):
        raise ValueError(f"levels must increase strictly, got {settings.levels!r}")
    # every (env, mode, strategy) planned: some algos train in some modes or with some curricula only
    for spec in plan(dataclasses.replace(settings, seeds=1)):
        run = loop_settings(settings, spec)
        validate_settings(run)
        check_steps(apply_preset(run), settings.steps)  # the rollout its trainer takes (fast, lean)


def plan(settings: BenchSettings) -> list[RunSpec]:
    """Every run of the benchmark, seed-major: an interrupted benchmark has whole seeds done."""
    specs = []
    for seed in range(settings.seeds):
        for env in settings.envs:
            for mode in settings.modes:
                strategies = settings.strategies if MODE_FLAGS[mode].adapts_env else ("fixed",)
                specs += [RunSpec(env, mode, strategy, seed) for strategy in strategies]
    return specs


def run_settings(settings: BenchSettings, spec: RunSpec) -> BenchSettings:
    """The bench's settings as one run uses and records them. Under the ``auto`` preset a run on
    an env of :data:`agents.loop.BENCH_AUTO_PRESETS` (the suite's) takes its trainer, and, when
    the bench compares strategies alone (``modes`` is ``("env",)``), its lambda (0: the
    curriculum alone, since the votes cost those learners held-out success); an ablation keeps
    the bench's lambda, so that its ``+ Env`` row stays the full loop."""
    bundle = BENCH_AUTO_PRESETS.get(spec.env, {})
    if settings.preset != "auto" or not bundle:
        return settings
    changes = {"algo": bundle["algo"]}
    if tuple(settings.modes) == ("env",) and "lam" in bundle:
        changes["lam"] = bundle["lam"]
    return dataclasses.replace(settings, **changes)


def loop_settings(settings: BenchSettings, spec: RunSpec) -> LoopSettings:
    """The loop settings of one run: the bench's shared settings (:func:`run_settings`), and the
    run's env, mode, strategy, seed."""
    settings = run_settings(settings, spec)
    shared = {f.name for f in dataclasses.fields(LoopSettings)} & {
        f.name for f in dataclasses.fields(settings)
    }
    return LoopSettings(
        **{name: getattr(settings, name) for name in shared - {"preset"}},
        env=spec.env, mode=spec.mode, curriculum=spec.strategy, seed=spec.seed, device="cpu",
        preset="" if settings.preset == "auto" else settings.preset,  # build_loop applies fast, lean
    )  # fmt: skip


def write_json_atomic(path: Path, payload: Any) -> None:
    """Write JSON atomically (a crash never leaves half a file)."""
    write_text_atomic(path, json.dumps(payload, indent=1))


def empirical_precision(
    p_won: np.ndarray, p_lost: np.ndarray, ms: tuple[int, ...], rng: np.random.Generator, pairs: int = 4000
) -> list[float]:
    """A(m) = P(S+ > S-) (strict, as in Theorem 1) for each m: S is the mean of m votes on a
    random step of a successful (+) or failed (-) trajectory, a vote being +1 with that step's
    probability. The theorem's votes are i.i.d. across steps; here the probability varies from
    step to step, so A(m) levels off at about P(p+ > p-) and may sit below the bound."""
    result = []
    for m in ms:
        s_plus = rng.binomial(m, rng.choice(p_won, pairs)) / m
        s_minus = rng.binomial(m, rng.choice(p_lost, pairs)) / m
        result.append(float(np.mean(s_plus > s_minus)))
    return result


def rm_heldout_metrics(prm: Any, env_id: str, levels: tuple[float, ...], seed: int) -> dict[str, Any]:
    """PRM metrics against exact labels on held-out oracle/random mixtures, and A(m) vs the bound."""
    from agents.reward_model import evaluate_prm
    from agents.trajectories import collect_mixture_trajectories
    from rla_gym.stats import precision_bound

    trajectories = []
    for k, level in enumerate(levels):
        trajectories += collect_mixture_trajectories(
            env_id, level, tasks=12, rollouts_per_task=4, seed=seed,
            task_seed_offset=HELDOUT_SEED_START + RM_SEED_OFFSET + 1000 * k,
        )  # fmt: skip
    metrics = evaluate_prm(prm, trajectories, m=3, seed=seed, warn=False)
    p = (prm.score(prm.steps(trajectories)).cpu().numpy() + 1) / 2  # P(vote = +1) per step
    outcomes = np.concatenate([[t.outcome] * len(t) for t in trajectories])
    won, lost = p[outcomes > 0], p[outcomes < 0]
    precision = []
    exact_mu = float("nan")
    if len(won) and len(lost):
        exact_mu = float(won.mean() + (1 - lost).mean())  # p+ + p- from the vote probabilities
        empirical = empirical_precision(won, lost, PRECISION_M, np.random.default_rng(seed))
        for m, value in zip(PRECISION_M, empirical, strict=True):
            precision.append({"m": m, "A": value, "bound": precision_bound(exact_mu, m)})
    keep = ("process_accuracy", "balanced_accuracy", "auc", "outcome_accuracy", "p_plus", "p_minus")
    return {**{k: float(metrics[k]) for k in keep}, "mu": exact_mu, "precision": precision}


def run_one(settings: BenchSettings, spec: RunSpec, position: int = 0) -> dict[str, Any]:
    """Train and evaluate one run; return its record (what ``runs/<id>.json`` holds)."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList
    from tqdm import tqdm

    import rla_gym  # noqa: F401
    from agents.evaluation import evaluate_batched, loop_batch_agent, run_metrics
    from agents.loop import build_loop
    from agents.loop_runtime import RLAnythingCallback

    torch.set_num_threads(1)
    import_plugins(settings)
    start = time.perf_counter()
    settings = run_settings(settings, spec)  # what the record says the run used
    loop_config = loop_settings(settings, spec)
    model, loop = build_loop(loop_config)
    evaluations: list[dict[str, Any]] = []

    def evaluate_now(tasks: int) -> None:
        """Both policies on the same held-out tasks: stochastic (``success``) and greedy."""
        entry: dict[str, Any] = {"step": int(model.num_timesteps), "tasks": tasks, "policy": "stochastic"}
        for key, deterministic in (("success", False), ("success_greedy", True)):
            agent = loop_batch_agent(model, loop_config, deterministic)
            rows = evaluate_batched(spec.env, agent, settings.levels, tasks)
            entry[key] = {r["difficulty"]: r["success"] for r in rows}
        evaluations.append(entry)

    class Periodic(BaseCallback):
        def _on_step(self) -> bool:
            bar.n = self.model.num_timesteps
            return True

        def _on_rollout_start(self) -> None:  # after the previous rollout's update
            bar.refresh()
            if self.model.num_timesteps >= settings.eval_every * len(evaluations):
                evaluate_now(settings.eval_episodes)

    prm = loop.reward_env.prm if isinstance(loop, RLAnythingCallback) else None  # Outcome-only: none
    rm_before = None if prm is None else rm_heldout_metrics(prm, spec.env, settings.levels, spec.seed)
    evaluate_now(settings.final_eval_episodes)  # paired with the final one: the Before row
    # disable=None: no bars where the output is not a terminal (logs, CI)
    with tqdm(
        total=settings.steps, desc=spec.run_id, position=position, leave=False, unit="step", disable=None
    ) as bar:
        model.learn(settings.steps, callback=CallbackList([loop, Periodic()]))
    evaluate_now(settings.final_eval_episodes)
    rm_after = None if prm is None else rm_heldout_metrics(prm, spec.env, settings.levels, spec.seed)
    history = [
        {"step": int(row["loop/timesteps"]), **{k: row[k] for k in HISTORY_KEYS if k in row}}
        for row in loop.history
    ]
    record = {
        "spec": dataclasses.asdict(spec),
        "settings": {k: v for k, v in dataclasses.asdict(settings).items() if k not in ("out", "config")},
        "evaluations": evaluations,
        "metrics": {
            key: run_metrics(
                settings.levels,
                [evaluations[-1][key][lv] for lv in settings.levels],
                curve=[(e["step"], area_under_levels(e[key], settings.levels)) for e in evaluations],
            )
            for key in ("success", "success_greedy")
        },
        "rm_before": rm_before,
        "rm_after": rm_after,
        "history": history,
        "wall_seconds": round(time.perf_counter() - start, 1),
        "versions": versions(),
    }
    return record


_REFERENCES_REMEDY = "delete it and rerun: it is made again from the settings of the runs"


def write_references(out: Path, settings: BenchSettings) -> dict[str, Any]:
    """``references.json``: per env, the success per level of random admissible commands and of
    the exact oracle on the final evaluation's held-out tasks (scores are normalised between
    them). Kept when it already holds every env at these levels and tasks, made by this
    ``rla_gym`` version (recorded with each env)."""
    import rla_gym
    from agents.evaluation import evaluate_batched, oracle_batch_agent, random_batch_agent

    path = out / "references.json"
    references: dict[str, Any] = read_json(path, _REFERENCES_REMEDY) if path.exists() else {}
    grid = [str(float(level)) for level in settings.levels]
    for env in settings.envs:
        known = references.get(env, {})
        if (
            known.get("tasks") == settings.final_eval_episodes
            and list(known.get("random", {})) == grid
            and known.get("rla_gym") == rla_gym.__version__
        ):
            continue
        # the env's version: its tasks (and so the references) may change with it
        entry: dict[str, Any] = {"tasks": settings.final_eval_episodes, "rla_gym": rla_gym.__version__}
        for name, agent in (("random", random_batch_agent(0)), ("oracle", oracle_batch_agent(0))):
            rows = evaluate_batched(env, agent, settings.levels, settings.final_eval_episodes)
            entry[name] = {str(r["difficulty"]): r["success"] for r in rows}
        references[env] = entry
    write_json_atomic(path, references)
    return references


def area_under_levels(success: dict[float, float], levels: Sequence[float]) -> float:
    """One evaluation's area under success against difficulty (:func:`~agents.evaluation.area_under`)."""
    from agents.evaluation import area_under

    return area_under(levels, [success[lv] for lv in levels], "levels")


def versions() -> dict[str, str]:
    import gymnasium
    import stable_baselines3
    import torch

    import rla_gym

    return {
        "python": platform.python_version(),
        "rla_gym": rla_gym.__version__,
        "gymnasium": gymnasium.__version__,
        "stable_baselines3": stable_baselines3.__version__,
        "torch": torch.__version__,
    }


def attempt(settings: BenchSettings, spec: RunSpec, position: int = 0) -> tuple[str, Any]:
    """``("done", record)``, or ``("crashed", traceback)``: a crashed run never stops the others."""
    try:
        return "done", run_one(settings, spec, position)
    except Exception:
        return "crashed", traceback.format_exc()


def _record(out: Path, spec: RunSpec, status: str, payload: Any) -> None:
    if status == "done":
        write_json_atomic(out / "runs" / f"{spec.run_id}.json", payload)
    else:
        (out / "runs" / f"{spec.run_id}.error.txt").write_text(str(payload))


def _exit_with_parent(parent: int, interval: float = 0.5) -> None:
    """End this process as soon as ``parent`` is gone (a ``kill -9`` of ``rla bench`` included),
    so that no orphaned run keeps writing results."""
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-parent").start()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _process_entry(settings: BenchSettings, spec: RunSpec, position: int, parent: int) -> None:
    _exit_with_parent(parent)
    # the parent ends a run under way with SIGTERM: unwound as an interrupt, the process exits
    # through multiprocessing's cleanup (its semaphores unregistered, no "leaked semaphore" warning)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        status, payload = attempt(settings, spec, position)
        _record(Path(settings.out), spec, status, payload)  # atomic: whole or not there
    except KeyboardInterrupt:  # Ctrl-C or the parent's SIGTERM: the run stays pending, quietly
        return


def _start_ignoring_ctrl_c(process: Any) -> None:
    """Start ``process`` with Ctrl-C ignored (a spawned child keeps a signal its parent ignores):
    the parent ends the runs under way itself, so none prints a traceback while it starts up or
    writes its result."""
    if threading.current_thread() is not threading.main_thread():  # only there can it be set
        process.start()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_processes(settings: BenchSettings, pending: list[RunSpec], bar: Any) -> dict[str, str]:
    """A local pool of ``workers`` processes (spawned: no torch state is forked); one per run, so a
    run that dies hard (killed, out of memory) is reported like one that raised. On Ctrl-C the
    runs under way are ended and stay pending (the next invocation runs them)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    queue = list(pending)
    running: dict[RunSpec, tuple[Any, int]] = {}
    status: dict[str, str] = {}
    free = list(range(1, settings.workers + 1))
    try:
        while queue or running:
            while queue and free:
                spec, position = queue.pop(0), free.pop(0)
                process = context.Process(target=_process_entry, args=(settings, spec, position, os.getpid()))
                _start_ignoring_ctrl_c(process)
                running[spec] = (process, position)
            time.sleep(0.2)
            for spec, (process, position) in list(running.items()):
                if not process.is_alive():
                    process.join()
                    del running[spec]
                    free.append(position)
                    status[spec.run_id] = _finished(Path(settings.out), spec, process.exitcode)
                    bar.update(1)
    except KeyboardInterrupt:
        for process, _ in running.values():
            process.terminate()
        for process, _ in running.values():
            process.join(timeout=30)
            if process.is_alive():  # stuck in a long native call: end it hard
                process.kill()
                process.join()
        raise
    return status


def _finished(out: Path, spec: RunSpec, exitcode: int | None) -> str:
    """``"done"`` or ``"crashed"`` for a run whose process ended (one that died without a word
    gets an error file saying how)."""
    done = (out / "runs" / f"{spec.run_id}.json").exists()
    error = out / "runs" / f"{spec.run_id}.error.txt"
    if not done and not error.exists():
        error.write_text(f"the run's process died with exit code {exitcode}\n")
    return "done" if done else "crashed"


def _run_ray(settings: BenchSettings, pending: list[RunSpec], bar: Any) -> dict[str, str]:
    """The same runs as Ray tasks (one CPU each); results travel back to this process."""
    try:
        import ray
    except ImportError as error:
        raise ImportError("--backend ray needs Ray: pip install 'rla-gym[ray]'") from error
    if not ray.is_initialized():
        if settings.ray_address:
            ray.init(address=settings.ray_address)
        else:
            ray.init(num_cpus=settings.workers, include_dashboard=False)
    remote = ray.remote(num_cpus=1, max_retries=0)(attempt)
    futures = {remote.remote(settings, spec): spec for spec in pending}
    status: dict[str, str] = {}
    try:
        _collect_ray(ray, futures, settings, status, bar)
    except KeyboardInterrupt:  # Ctrl-C: the tasks under way end and their runs stay pending
        for future in futures:
            ray.cancel(future, force=True)
        raise
    return status


def _collect_ray(
    ray: Any, futures: dict[Any, RunSpec], settings: BenchSettings, status: dict[str, str], bar: Any
) -> None:
    """Record the Ray tasks' runs as they finish (``futures`` empties)."""
    while futures:
        ready, _ = ray.wait(list(futures), num_returns=1)
        for future in ready:
            spec = futures.pop(future)
            try:
                result, payload = ray.get(future)
            except Exception as error:  # the worker itself died
                result, payload = "crashed", f"Ray task failed: {error!r}\n"
            _record(Path(settings.out), spec, result, payload)
            status[spec.run_id] = result
            bar.update(1)


def same_run_as(spec: RunSpec, specs: Sequence[RunSpec]) -> RunSpec | None:
    """The planned run that ``spec`` would repeat step for step, or None.

    The full loop with the fixed strategy (mode ``env``, strategy ``fixed``) builds what
    ``reward`` builds: the same PRM training and a :class:`FixedCurriculum` at ``difficulty``
    (``adapts_env`` only picks the curriculum), so it trains and evaluates exactly as the
    + Reward run of its env and seed. The bench copies that run instead of repeating it.
    """
    if spec.mode != "env" or spec.strategy != "fixed":
        return None
    twin = RunSpec(spec.env, "reward", "fixed", spec.seed)
    return twin if twin in specs else None


def _copy_twin_runs(out: Path, twins: dict[RunSpec, RunSpec]) -> dict[str, str]:
    """Write each run of ``twins`` as a copy of its finished twin (``copy_of`` names it); a run
    whose twin did not finish stays pending (the next invocation retries both)."""
    status = {}
    for spec, twin in twins.items():
        source = out / "runs" / f"{twin.run_id}.json"
        if source.exists():
            record = read_json(source, _RUN_REMEDY)
            record["spec"], record["copy_of"] = dataclasses.asdict(spec), twin.run_id
            write_json_atomic(out / "runs" / f"{spec.run_id}.json", record)
            status[spec.run_id] = "done"
        else:
            status[spec.run_id] = "crashed"
    return status


#: What to do about a run file that is not valid JSON.
_RUN_REMEDY = "delete it to run that run again"


def _differing(saved: dict[str, Any], settings: BenchSettings, spec: RunSpec | None) -> list[str]:
    """The :data:`RUN_SETTINGS` in which a run's saved settings differ from those ``settings``
    give it (:func:`run_settings`; without a spec, the bench's own)."""
    ours = settings if spec is None else run_settings(settings, spec)
    current = json.loads(json.dumps({k: getattr(ours, k) for k in RUN_SETTINGS}))
    return sorted(k for k in RUN_SETTINGS if saved.get(k) != current[k])


def check_resumable(out: Path, settings: BenchSettings) -> None:
    """Refuse to mix finished runs made with other :data:`RUN_SETTINGS` into this benchmark: every
    run in ``out`` is checked, planned or not, since they share ``references.json``. Under the
    ``auto`` preset a run is checked against the settings of its env (:func:`run_settings`)."""
    runs: list[tuple[Path, dict[str, Any], RunSpec | None]] = []
    for path in sorted((out / "runs").glob("*.json")):
        record = read_json(path, _RUN_REMEDY)
        saved = record.get("settings") if isinstance(record, dict) else None
        if not isinstance(saved, dict):
            raise ValueError(f"{path} is not an rla bench run (no settings); {_RUN_REMEDY}")
        known = record.get("spec")
        spec = None
        if isinstance(known, dict) and {"env", "mode"} <= set(known):
            spec = RunSpec(str(known["env"]), str(known["mode"]), "", 0)
        older = {key: saved[same] for key, same in UNSAVED_SAME_AS.items() if same in saved}
        runs.append((path, {**UNSAVED_DEFAULTS, **older, **saved}, spec))
    for path, saved, spec in runs:
        differ = _differing(saved, settings, spec)
        if differ:
            hint = ""
            other, fix = _other_preset(settings)
            if all(not _differing(s, other, sp) for _, s, sp in runs):  # name a fix only if it works
                made = "without" if settings.preset == "auto" else "under"
                hint = f" (made {made} rla bench's default preset, auto: {fix})"
            raise ValueError(
                f"{out} holds runs made with other settings ({', '.join(differ)}, e.g. {path.name}){hint}; "
                "use the same settings to resume, or another --out"
            )


def _other_preset(settings: BenchSettings) -> tuple[BenchSettings, str]:
    """The settings the command line would give with ``auto`` switched (off, or back on with the
    flags it refuses or overrides left out), and what to change to get them."""
    if settings.preset == "auto":
        return dataclasses.replace(settings, preset=""), "add --preset ''"
    defaults = BenchSettings()
    other = dataclasses.replace(settings, preset="auto", algo=defaults.algo)
    try:
        apply_preset(other, {"lam"} if settings.lam != defaults.lam else set())
    except ValueError:  # a lambda auto sets on these runs: leave it out too
        return dataclasses.replace(other, lam=defaults.lam), "leave out --preset, --algo and --lam"
    return other, "leave out --preset and --algo"


def check_out(out: Path, settings: BenchSettings) -> list[Any]:
    """Refuse, before anything is written, an ``out`` that is a file, holds a JSON file that is
    not valid JSON or runs made with other settings; return its invocation log (a list)."""
    for directory in (out, out / "runs"):
        if directory.exists() and not directory.is_dir():
            raise ValueError(f"--out {out}: {directory} is a file, not a directory; choose another --out")
    log_path = out / "invocations.json"
    log = read_json(log_path, "move it aside to start a new log") if log_path.exists() else []
    if not isinstance(log, list):
        raise ValueError(f"{log_path} is not an rla bench log (a list); move it aside to start a new log")
    if (out / "references.json").exists():
        read_json(out / "references.json", _REFERENCES_REMEDY)
    if (out / "runs").is_dir():
        check_resumable(out, settings)
    return log


def resolve_settings(settings: BenchSettings) -> BenchSettings:
    """``settings`` with its config file read and its preset applied, as ``rla bench`` does: what
    the file sets counts as given, like a field set away from its default (so a file's
    ``algo = "ppo"`` keeps PPO under ``auto``)."""
    in_file = set(read_settings_file(settings.config, type(settings))) if settings.config else set()
    settings = load_config(settings)
    defaults = dataclasses.asdict(type(settings)())
    given = in_file | {key for key, value in dataclasses.asdict(settings).items() if value != defaults[key]}
    return apply_preset(settings, given)


def bench(settings: BenchSettings) -> dict[str, Any]:
    """Run every pending run of the benchmark, then write the report; returns the summary."""
    from tqdm import tqdm

    from agents.bench_report import write_report

    settings = resolve_settings(settings)
    validate(settings)
    out = Path(settings.out)
    log_path = out / "invocations.json"
    log = check_out(out, settings)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    specs = plan(settings)
    pending = [s for s in specs if not (out / "runs" / f"{s.run_id}.json").exists()]
    skipped = [s.run_id for s in specs if s not in pending]
    twins = {s: twin for s in pending if (twin := same_run_as(s, specs)) is not None}
    pending = [s for s in pending if s not in twins]
    if skipped:
        print(f"rla bench: {len(skipped)} finished run(s) in {out} are kept: {', '.join(skipped)}")
    for spec in pending:  # a crashed run is retried by the next invocation
        (out / "runs" / f"{spec.run_id}.error.txt").unlink(missing_ok=True)
    start = time.perf_counter()
    write_references(out, settings)
    # the invocation is on record from its start, so a killed one is visible too
    entry: dict[str, Any] = {
        "settings": dataclasses.asdict(settings), "runs": len(specs), "ran": len(pending),
        "skipped": skipped, "copied": sorted(s.run_id for s in twins), "status": "running",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "versions": versions(),
    }  # fmt: skip
    if settings.preset == "auto":  # each run's record holds its settings; here, what auto changed
        chosen = {e: run_settings(settings, RunSpec(e, "env", "", 0)) for e in settings.envs}
        entry["auto"] = {e: {"algo": s.algo, "lam": s.lam} for e, s in chosen.items()}
    log.append(entry)
    write_json_atomic(log_path, log)
    try:
        with tqdm(
            total=len(specs), initial=len(specs) - len(pending), desc="rla bench", unit="run", disable=None
        ) as bar:
            runner = _run_ray if settings.backend == "ray" else _run_processes
            status = runner(settings, pending, bar) if pending else {}
    except KeyboardInterrupt:
        entry.update(status="interrupted", wall_seconds=round(time.perf_counter() - start, 1))
        write_json_atomic(log_path, log)
        raise
    status.update(_copy_twin_runs(out, twins))
    crashed = sorted(run_id for run_id, result in status.items() if result == "crashed")
    entry.update(status="finished", crashed=crashed, wall_seconds=round(time.perf_counter() - start, 1))
    write_json_atomic(log_path, log)
    summary = write_report(out, [s.run_id for s in specs])
    summary["crashed"] = crashed
    return summary
