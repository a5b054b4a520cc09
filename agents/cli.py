"""The ``rla`` command line; each subcommand's options come from a settings dataclass."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from agents.fields import described
from rla_gym.core import check_difficulty
from rla_gym.registration import make_rla_env


@dataclasses.dataclass
class DemoSettings:
    """Run the exact oracle and a random agent on held-out tasks at several difficulties."""

    env: str = described("RLA-TextNav-v0", "registered env id")
    difficulties: tuple[float, ...] = described((0.0, 0.25, 0.5, 0.75, 1.0), "difficulty levels in [0, 1]")
    episodes: int = described(200, "held-out tasks per level")
    seed: int = described(0, "seed of the agents' randomness")


@dataclasses.dataclass
class PlaySettings:
    """Play one episode by hand in the terminal."""

    env: str = described("RLA-TextNav-v0", "registered env id")
    difficulty: float = described(0.3, "difficulty in [0, 1]")
    seed: int | None = described(None, "reset seed")


def demo(settings: DemoSettings) -> list[dict[str, Any]]:
    """Print and return one row per difficulty: optimal length, oracle and random success, speed."""
    from rla_gym.evaluation import evaluate, heldout_seeds, oracle_agent, random_agent

    if settings.episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {settings.episodes}")
    difficulties = [check_difficulty(d) for d in settings.difficulties]  # all, before the first row
    env = make_rla_env(settings.env)
    seeds = heldout_seeds(settings.episodes)
    rows = []
    header = (
        f"{'difficulty':>10} {'optimal len':>11} {'oracle success':>14} {'random success':>14} {'steps/s':>9}"
    )
    print(
        f"{settings.env}: {settings.episodes} held-out tasks per level (random = random admissible command)"
    )
    print(header)
    for difficulty in difficulties:
        oracle = evaluate(env, oracle_agent, difficulty, seeds, seed=settings.seed)
        rand = evaluate(env, random_agent, difficulty, seeds, seed=settings.seed)
        row = {
            "difficulty": difficulty,
            "optimal_len": oracle.mean_optimal_len,
            "oracle_success": oracle.success_rate,
            "random_success": rand.success_rate,
            "steps_per_second": rand.steps_per_second,
        }
        rows.append(row)
        print(
            f"{difficulty:>10.2f} {row['optimal_len']:>11.1f} {row['oracle_success']:>14.2f}"
            f" {row['random_success']:>14.2f} {row['steps_per_second']:>9,.0f}"
        )
    env.close()
    return rows


def play(settings: PlaySettings, read: Callable[[str], str] = input) -> bool:
    """Play an episode: type a command's number or name; 'q' quits. Returns success."""
    env = make_rla_env(settings.env, difficulty=settings.difficulty, obs_mode="text")
    names = [name.lower() for name in env.unwrapped.action_names]  # type: ignore[attr-defined]
    obs, info = env.reset(seed=settings.seed)
    print(f"Optimal solution: {info['optimal_len']} commands; budget {info['step_budget']}.")
    while True:
        print("\n" + obs)
        admissible = [a for a, ok in enumerate(info["action_mask"]) if ok]
        print("Commands: " + ", ".join(f"[{a}] {names[a]}" for a in admissible))
        try:
            answer = read("> ").strip().lower()
        except (EOFError, KeyboardInterrupt):  # Ctrl-D, Ctrl-C or the end of piped input
            print()
            answer = "q"
        if answer in {"q", "quit"}:
            return False
        action = int(answer) if answer.isdigit() else names.index(answer) if answer in names else -1
        if action not in admissible:
            print(f"Not an admissible command: {answer!r}")
            continue
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            print("\n" + obs + ("\nSuccess!" if info["is_success"] else "\nOut of steps."))
            return bool(info["is_success"])


@dataclasses.dataclass
class EvalSettings:
    """Evaluate a trained run's policy, and LLM policies, on held-out tasks at fixed difficulties."""

    run: str = described(
        "latest", "run directory of rla train (latest: the newest under runs/; empty: the LLM policies only)"
    )
    episodes: int = described(200, "held-out tasks per difficulty (the same for every run: paired)")
    levels: tuple[float, ...] = described(
        tuple(round(0.1 * k, 1) for k in range(11)), "difficulties (the protocol's grid: 0 to 1 by 0.1)"
    )
    llm: tuple[str, ...] = described(
        (),
        "LLM policies on the same tasks: scripted:oracle, scripted:random, hf:PATH, openai:URL:MODEL",
    )
    env: str = described("", "env id of the LLM-only evaluation (with a run: the run's env)")
    llm_temperature: float = described(1.0, "sampling temperature of the LLMs' stochastic column")
    llm_max_new_tokens: int = described(256, "longest LLM reply, in tokens")


def _resolve_run(run: str) -> str:
    """``run``, or for ``latest`` the newest directory under ``runs/`` with a checkpoint."""
    if run != "latest":
        return run
    checkpoints = sorted(Path("runs").glob("*/checkpoint.pt"), key=lambda path: path.stat().st_mtime)
    if not checkpoints:
        raise ValueError("no run to evaluate: runs/ holds no checkpoint (run rla train, or give --run DIR)")
    return str(checkpoints[-1].parent)


def _print_evaluation(rows: list[dict[str, float]]) -> None:
    print(
        "held-out success: the stochastic policy (the field's figure), then the greedy one; "
        "mean length: the stochastic policy's episodes"
    )
    print(f"{'difficulty':>10} {'stochastic':>10} {'greedy':>7} {'mean length':>11}")
    for row in rows:
        print(
            f"{row['difficulty']:>10.2f} {row['success']:>10.2f} {row['success_greedy']:>7.2f}"
            f" {row['mean_length']:>11.1f}"
        )
    if len(rows) > 1:
        from agents.evaluation import run_metrics

        levels = [row["difficulty"] for row in rows]
        for name, key in (("stochastic", "success"), ("greedy", "success_greedy")):
            metrics = run_metrics(levels, [row[key] for row in rows])
            print(
                f"{name}: frontier d50 {metrics['d50']:.2f}, "
                f"area under success vs difficulty {metrics['auc_difficulty']:.2f}"
            )


def train_command(settings: Any) -> dict[str, Any]:
    """Run or resume the closed loop, then print the held-out evaluation."""
    from agents.train import train

    results = train(settings)
    from agents.loop_runtime import MODE_FLAGS

    tasks = (
        f"curriculum {settings.curriculum}"
        if MODE_FLAGS[settings.mode].adapts_env
        else f"difficulty {settings.difficulty}"
    )
    loop = "Outcome-only" if settings.mode == "outcome" else ""
    if settings.mode == "env":  # lambda 0: the PRM trains, but its votes do not reach the learner
        loop = "the full loop" if settings.lam else "the curriculum alone: lambda 0"
    mode = f"mode {settings.mode}" + (f" ({loop})" if loop else "")
    print(f"{settings.env}, algo {settings.algo}, {mode}, {tasks}: {results['steps']} steps")
    _print_evaluation(results["evaluation"])
    print(f"run directory: {results['out']}")
    return results


def _print_comparison(rows: list[dict[str, Any]], env_id: str, episodes: int) -> None:
    """One table for every policy; invalid replies (stochastic / greedy) are the LLMs' only."""
    width = max(6, *(len(row["policy"]) for row in rows))
    print(
        f"{env_id}: held-out success on {episodes} tasks per difficulty, stochastic then greedy "
        "(mean length: stochastic)"
    )
    print(
        f"{'policy':<{width}} {'difficulty':>10} {'stochastic':>10} {'greedy':>7} {'mean length':>11} invalid"
    )
    for row in rows:
        invalid = (
            f"{row['invalid_replies']:.2f}/{row['invalid_replies_greedy']:.2f}"
            if "invalid_replies" in row
            else "-"
        )
        print(
            f"{row['policy']:<{width}} {row['difficulty']:>10.2f} {row['success']:>10.2f}"
            f" {row['success_greedy']:>7.2f} {row['mean_length']:>11.1f} {invalid}"
        )


def _load_and_name(run: str, load_run: Any) -> tuple[Any, Any, str]:
    """The run's model, settings and directory (``latest`` resolved), after a line naming it."""
    directory = _resolve_run(run)
    model, settings = load_run(directory)
    what = f"{settings.env}, algo {settings.algo}, mode {settings.mode}, {model.num_timesteps} steps"
    print(f"run {directory}: {what}")
    return model, settings, directory


def _evaluate_run(model: Any, run: Any, levels: tuple[float, ...], episodes: int) -> list[dict[str, Any]]:
    """A trained run's rows on ``episodes`` held-out tasks per level, with torch on one thread (a
    run's small networks: more threads only contend on a shared machine), the thread count
    restored after (an LLM beside it keeps its threads)."""
    import torch

    from agents.train import evaluate_both

    run.eval_episodes = episodes
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return list(evaluate_both(model, run, levels))
    finally:
        torch.set_num_threads(threads)


def eval_command(settings: EvalSettings) -> list[dict[str, Any]]:
    """Held-out success of a trained run and of LLM policies, on the same tasks."""
    try:
        from agents.train import load_run
    except ImportError as error:
        raise _needs_train_extra("eval") from error
    if settings.episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {settings.episodes}")
    levels = tuple(check_difficulty(level, "level") for level in settings.levels)
    if not levels or any(b <= a for a, b in itertools.pairwise(levels)):
        raise ValueError(
            f"levels must be at least one difficulty, increasing strictly, got {settings.levels!r}"
        )
    if not settings.run and not settings.llm:
        raise ValueError("nothing to evaluate: give --run, --llm or both")
    if not settings.llm:
        model, run, directory = _load_and_name(settings.run, load_run)
        run_rows = _evaluate_run(model, run, levels, settings.episodes)
        _print_evaluation(run_rows)
        return run_rows
    from agents.llm.evaluate import evaluate_llm, policy_from_spec

    policies = [  # every spec is checked (and a model loaded) before any evaluation runs
        policy_from_spec(
            spec, temperature=settings.llm_temperature, max_new_tokens=settings.llm_max_new_tokens
        )
        for spec in settings.llm
    ]
    rows: list[dict[str, Any]] = []
    env_id = settings.env
    if settings.run:
        model, run, directory = _load_and_name(settings.run, load_run)
        if env_id and env_id != run.env:
            raise ValueError(f"--env {env_id} differs from the run's env {run.env}")
        env_id = run.env
        rows += [
            {"policy": f"{run.algo}: {directory}", **row}
            for row in _evaluate_run(model, run, levels, settings.episodes)
        ]
    elif not env_id:
        raise ValueError("an LLM-only evaluation needs --env")
    make_rla_env(env_id).close()
    for policy in policies:
        rows += evaluate_llm(policy, env_id, levels, settings.episodes)
    _print_comparison(rows, env_id, settings.episodes)
    return rows


class RunsFailed(Exception):
    """Some runs of a command failed and the others finished: ``rla`` exits with status 1."""


def bench_command(settings: Any) -> dict[str, Any]:
    """Run the benchmark (skipping finished runs), then print its summary tables; raises
    :class:`RunsFailed` naming the runs that crashed, after the report."""
    from agents.bench import bench

    try:
        summary = bench(settings)
    except KeyboardInterrupt as error:
        raise KeyboardInterrupt(
            f"interrupted; the finished runs are kept in {settings.out}: rerun the same command to continue"
        ) from error
    print((Path(settings.out) / "summary.md").read_text())
    print(f"results: {settings.out}")
    if summary["crashed"]:
        errors = Path(settings.out) / "runs" / "<id>.error.txt"
        raise RunsFailed(
            f"{len(summary['crashed'])} run(s) crashed: {', '.join(summary['crashed'])}; their errors are "
            f"in {errors}; rerun the same command to retry them (finished runs are kept)"
        )
    return summary


def _needs_train_extra(command: str) -> ImportError:
    return ImportError(
        f"rla {command} needs the torch side: pip install 'rla-gym[train]'"
        " (from a clone: pip install '.[train]')"
    )


def _bench_settings() -> type:
    try:
        from agents.bench import BenchCommandSettings
    except ImportError as error:
        raise _needs_train_extra("bench") from error
    return BenchCommandSettings


def _train_settings() -> type:
    try:
        from agents.train import TrainCommandSettings
    except ImportError as error:
        raise _needs_train_extra("train") from error
    return TrainCommandSettings


#: name -> (one-line help, the settings class (imported when the command is used), the runner).
#: ``train`` and ``bench`` need the torch side; ``demo`` and ``play`` never import it.
COMMANDS: dict[str, tuple[str, Callable[[], type], Callable[[Any], Any]]] = {
    "demo": (DemoSettings.__doc__ or "", lambda: DemoSettings, demo),
    "play": (PlaySettings.__doc__ or "", lambda: PlaySettings, play),
    "train": ("Run or resume the closed RLAnything loop, then evaluate it.", _train_settings, train_command),
    "eval": (EvalSettings.__doc__ or "", lambda: EvalSettings, eval_command),
    "bench": ("Benchmark loop modes and curriculum strategies over envs and seeds.", _bench_settings,
              bench_command),
}  # fmt: skip


class _Flatten(argparse.Action):
    """Stores the values of ``nargs="+"`` whose items are lists (comma-separated) as one list."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, [item for part in values for item in part])


def _comma_separated(kind: type) -> Callable[[str], list[Any]]:
    def parse(text: str) -> list[Any]:
        return [kind(part) for part in text.split(",") if part]

    parse.__name__ = kind.__name__  # argparse names the type in its error messages
    return parse


def _add_settings(parser: argparse.ArgumentParser, settings: type, suppress: bool = False) -> None:
    hints = typing.get_type_hints(settings)
    for f in dataclasses.fields(settings):
        kind, flag = hints[f.name], "--" + f.name.replace("_", "-")
        options: dict[str, Any] = {
            "default": argparse.SUPPRESS if suppress else f.default,
            "help": f"{f.metadata.get('help', '')} (default: %(default)s)",
        }
        args = typing.get_args(kind)
        if kind is bool:
            options["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(kind) is tuple:  # "--envs a b" or "--envs a,b"
            options.update(nargs="+", type=_comma_separated(args[0]), action=_Flatten)
            options["help"] = (
                f"{f.metadata.get('help', '')}, comma- or space-separated (default: %(default)s)"
            )
        elif typing.get_origin(kind) in (typing.Union, types.UnionType):
            options["type"] = next(a for a in args if a is not type(None))
        else:
            options["type"] = kind
        parser.add_argument(flag, **options)


def build_parser(suppress_defaults: bool = False, command: str | None = None) -> argparse.ArgumentParser:
    """The ``rla`` parser, one subcommand per entry of :data:`COMMANDS`.

    Only ``command``'s options are added (all commands' with ``None``), so a command imports
    only what it needs. ``suppress_defaults=True`` leaves options that were not given out of
    the namespace.
    """
    parser = argparse.ArgumentParser(prog="rla", description="rla-gym: adaptive-difficulty environments")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (text, settings, _) in COMMANDS.items():
        subparser = sub.add_parser(name, help=text, description=text)
        if command is None or name == command:
            _add_settings(subparser, settings(), suppress_defaults)
    return parser


def _command_of(argv: Sequence[str]) -> str:
    """The subcommand named in ``argv`` ("" when there is none, e.g. ``rla --help``)."""
    return next((arg for arg in argv if arg in COMMANDS), "")


def _as_flag(message: str, fields: set[str]) -> str:
    """A settings error as the command line says it: a message that starts with a field's name
    ("n_envs must be ...", from the Python API) starts with its flag ("--n-envs must be ...")."""
    name = message.split(" ", 1)[0]
    if name in fields and " " in message:
        return "--" + name.replace("_", "-") + message[len(name) :]
    return message


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rla`` console script."""
    import rla_gym  # noqa: F401  (registers the env ids)

    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(argv)
    try:
        parser = build_parser(command=command)
    except ImportError as error:  # the lean install: no torch side
        print(f"rla: error: {error}", file=sys.stderr)
        return 2
    args = vars(parser.parse_args(argv))
    _, settings_of, run = COMMANDS[args.pop("command")]
    settings_cls = settings_of()
    fields = {f.name for f in dataclasses.fields(settings_cls)}
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in args.items() if k in fields}
    try:
        given = set(vars(build_parser(suppress_defaults=True, command=command).parse_args(argv)))
        if kwargs.get("config"):  # defaults < the config file < flags given on the command line
            from agents.bench import load_config, read_settings_file

            in_file = set(read_settings_file(str(kwargs["config"]), settings_cls))
            kwargs = dataclasses.asdict(load_config(settings_cls(**kwargs), given))
            given |= in_file  # what the file sets wins over a preset too, even at a default value
        settings = settings_cls(**kwargs)
        if getattr(settings, "resume", False):  # the run's own settings < flags given
            from agents.train import resume_settings

            settings = resume_settings(settings, given)
        if getattr(settings, "preset", ""):  # defaults < the preset < the config file < flags
            from agents.loop import apply_preset

            settings = apply_preset(settings, given)
        if command == "train":  # flags typed that this run does not read: say so, then train
            from agents.loop import ignored_settings, validate_settings

            try:  # no notes on a run that will not start (train names the bad value)
                validate_settings(settings)
                notes = ignored_settings(settings, given)
            except (ValueError, TypeError):
                notes = []
            for note in notes:
                print(f"rla: note: {note}", file=sys.stderr)
        run(settings)
    except (ValueError, TypeError) as error:
        print(f"rla: error: {_as_flag(str(error), fields)}", file=sys.stderr)
        return 2
    except (OSError, ImportError, gym.error.Error) as error:
        print(f"rla: error: {error}", file=sys.stderr)
        return 2
    except RunsFailed as error:
        print(f"rla: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as error:  # Ctrl-C: one line (what to run to continue), no traceback
        print(f"\nrla: {str(error) or 'interrupted'}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
