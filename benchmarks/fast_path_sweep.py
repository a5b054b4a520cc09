"""Fast training configurations against `rla bench`'s PPO: steps/s and held-out success at a step count.

    python benchmarks/fast_path_sweep.py [--steps 100000] [--seeds 0 1 2] [--configs NAME ...]

Each configuration trains Outcome-only (mode ``outcome``) on RLA-TextNav-v0 at a fixed
difficulty (``difficulty = max_difficulty``, 0.25 unless ``--difficulty``) with
``agents.loop.build_loop`` and ``model.learn``, exactly as ``training_throughput.py`` does:
steps/s is env steps over the wall time of ``learn`` (one torch thread, no evaluation inside);
held-out success afterwards is the stochastic policy's (the primary figure) and the greedy one's
on 100 held-out tasks at the training difficulty. The first configuration is the baseline
(``LoopSettings(algo="ppo")``'s defaults, what ``rla bench --preset ''`` runs); the summary gives every
configuration's median steps/s as a ratio to the baseline's in the same run, by wall time and
by the process's CPU time (which other jobs on a shared machine disturb far less). Runs go one
at a time, seed by seed, the configuration order reversed on every other seed so that a drift
in the machine's load falls on all of them alike. ``--configs`` defaults to FINAL, the
configurations of the 3-seed run; the rest of CONFIGS is the 1-seed screen that chose them
(its tables are under ``screen`` in the committed results). CHEAPER are the configurations with
the cheaper policy (encoder ``flatten-small``) and the lean loop ``agents.batched_ppo``, run on
two seeds with ``--configs`` and ``--out benchmarks/results/fast_path_sweep_small.json``.

A configuration is LoopSettings fields, plus an optional ``"model"`` dict of settings that
LoopSettings does not expose (the learning rate; the group trainer's epochs, minibatch, KL
coefficient and clip range, which the loop leaves at ``GroupPPO``'s defaults): those are set on
the built model before ``learn``; or ``{"batched_ppo": BatchedPPO's arguments}``.
Results: ``benchmarks/results/fast_path_sweep.json``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from training_throughput import (
    build,
    result_row,
    run_parser,
)  # a sibling: a script runs with its folder on sys.path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "fast_path_sweep.json"

#: Settings of the built model that LoopSettings does not reach (see the module doc).
MODEL_KNOBS = ("learning_rate", "n_epochs", "batch_size", "kl_coef", "clip_range", "ent_coef")


def _ppo(n_envs: int, n_steps: int, batch: int, epochs: int, lr: float | None = None) -> dict[str, Any]:
    """PPO on the batched vector env (the array-state env from 64 envs on)."""
    fields: dict[str, Any] = {"algo": "ppo", "vec_env": "batched", "n_envs": n_envs, "n_steps": n_steps,
                              "batch_size": batch, "n_epochs": epochs}  # fmt: skip
    return fields | ({"model": {"learning_rate": lr}} if lr else {})


def _small(fields: dict[str, Any]) -> dict[str, Any]:
    """The same configuration with the encoder flatten-small (and its one 64-unit layer per head)."""
    return fields | {"encoder": "flatten-small"}


def _batched(n_envs: int, n_steps: int, encoder: str = "flatten-small") -> dict[str, Any]:
    """The lean loop agents.batched_ppo: minibatch 512, 4 epochs, lr 1e-3."""
    return {"batched_ppo": {"n_envs": n_envs, "n_steps": n_steps, "batch_size": 512, "n_epochs": 4,
                            "learning_rate": 1e-3, "encoder": encoder}}  # fmt: skip


def _grpo(groups: int, size: int = 8, filter_: str = "all", **model: Any) -> dict[str, Any]:
    """The group trainer on the batched vector env; ``model``: GroupPPO settings (module doc)."""
    fields: dict[str, Any] = {"algo": "grpo", "vec_env": "batched", "groups": groups, "group_size": size,
                              "group_filter": filter_}  # fmt: skip
    return fields | ({"model": model} if model else {})


#: name -> LoopSettings fields (and "model" settings); the first is the baseline, then the
#: configurations of the 3-seed run (FINAL), then the rest of the 1-seed screen.
#: ppo-EnvsxSteps-mbBatch-eEpochs[-lrLR]; grpo-GroupsxSize[-mixed][-eEpochs][-mbBatch][-lrLR][-clipC][-klK].
CONFIGS: dict[str, dict[str, Any]] = {
    "baseline (ppo, 4 dummy envs x 256, mb 256, 10 ep)": {"algo": "ppo"},
    "ppo-128x8-mb384-e3-lr1e-3": _ppo(128, 8, 384, 3, 1e-3),  # minibatches 384, 384, 256
    "ppo-128x8-mb512-e3-lr1e-3": _ppo(128, 8, 512, 3, 1e-3),
    "ppo-128x8-mb512-e4-lr1e-3": _ppo(128, 8, 512, 4, 1e-3),
    "ppo-64x16-mb256-e4-lr1e-3": _ppo(64, 16, 256, 4, 1e-3),
    "grpo-32x8-mixed-lr1e-3": _grpo(32, filter_="mixed", learning_rate=1e-3),
    "ppo-16x64-mb256-e10": _ppo(16, 64, 256, 10),
    "ppo-64x128-mb2048-e4 (wide, earlier)": _ppo(64, 128, 2048, 4) | {"ent_coef": 0.01},
    "ppo-64x16-mb256-e10": _ppo(64, 16, 256, 10),
    "ppo-64x16-mb512-e4-lr1e-3": _ppo(64, 16, 512, 4, 1e-3),
    "ppo-64x16-mb512-e4-lr2e-3": _ppo(64, 16, 512, 4, 2e-3),
    "ppo-64x32-mb1024-e4-lr2e-3": _ppo(64, 32, 1024, 4, 2e-3),
    "ppo-64x32-mb256-e2-lr1e-3": _ppo(64, 32, 256, 2, 1e-3),
    "ppo-64x32-mb512-e2-lr2e-3": _ppo(64, 32, 512, 2, 2e-3),
    "ppo-64x32-mb512-e4-lr1e-3": _ppo(64, 32, 512, 4, 1e-3),
    "ppo-64x32-mb512-e4-lr2e-3": _ppo(64, 32, 512, 4, 2e-3),
    "ppo-64x64-mb1024-e4-lr1e-3": _ppo(64, 64, 1024, 4, 1e-3),
    "ppo-64x64-mb512-e10": _ppo(64, 64, 512, 10),
    "ppo-128x16-mb512-e4-lr1e-3": _ppo(128, 16, 512, 4, 1e-3),
    "ppo-128x8-mb1024-e4-lr1e-3": _ppo(128, 8, 1024, 4, 1e-3),
    "ppo-128x8-mb256-e2-lr1e-3": _ppo(128, 8, 256, 2, 1e-3),
    "ppo-128x8-mb256-e3-lr1e-3": _ppo(128, 8, 256, 3, 1e-3),
    "ppo-128x8-mb512-e2-lr1e-3": _ppo(128, 8, 512, 2, 1e-3),
    "ppo-128x8-mb512-e3-lr1.5e-3": _ppo(128, 8, 512, 3, 1.5e-3),
    "ppo-128x8-mb512-e4-lr1.5e-3": _ppo(128, 8, 512, 4, 1.5e-3),
    "ppo-128x8-mb512-e3-lr7e-4": _ppo(128, 8, 512, 3, 7e-4),
    "ppo-256x4-mb1024-e4-lr1e-3": _ppo(256, 4, 1024, 4, 1e-3),
    "ppo-256x4-mb512-e3-lr1e-3": _ppo(256, 4, 512, 3, 1e-3),
    "ppo-256x4-mb512-e4-lr1e-3": _ppo(256, 4, 512, 4, 1e-3),
    "ppo-256x8-mb512-e4-lr1e-3": _ppo(256, 8, 512, 4, 1e-3),
    "grpo-16x8-lr1e-3": _grpo(16, learning_rate=1e-3),
    "grpo-32x16-mixed-lr1e-3": _grpo(32, 16, "mixed", learning_rate=1e-3),
    "grpo-32x8": _grpo(32),
    "grpo-32x8-lr1e-3": _grpo(32, learning_rate=1e-3),
    "grpo-32x8-lr1e-3-clip0.3-kl0": _grpo(32, learning_rate=1e-3, clip_range=0.3, kl_coef=0.0),
    "grpo-32x8-mixed-e20-lr1e-3": _grpo(32, filter_="mixed", n_epochs=20, learning_rate=1e-3),
    "grpo-32x8-mixed-lr3e-3": _grpo(32, filter_="mixed", learning_rate=3e-3),
    "grpo-32x8-mixed-mb64-lr1e-3": _grpo(32, filter_="mixed", batch_size=64, learning_rate=1e-3),
    "grpo-64x4-lr1e-3": _grpo(64, 4, learning_rate=1e-3),
    "grpo-64x8-mixed-lr1e-3": _grpo(64, filter_="mixed", learning_rate=1e-3),
    "grpo-8x8": _grpo(8),
    "grpo-8x8-lr1e-3": _grpo(8, learning_rate=1e-3),
    "ppo-128x8-mb512-e4-lr1e-3-small": _small(_ppo(128, 8, 512, 4, 1e-3)),
    "ppo-128x8-mb512-e3-lr1e-3-small": _small(_ppo(128, 8, 512, 3, 1e-3)),
    "ppo-256x4-mb512-e4-lr1e-3-small": _small(_ppo(256, 4, 512, 4, 1e-3)),
    "batched-128x8-mb512-e4-lr1e-3": _batched(128, 8, "flatten"),
    "batched-128x8-mb512-e4-lr1e-3-small": _batched(128, 8),
    "batched-256x4-mb512-e4-lr1e-3-small": _batched(256, 4),
}  # fmt: skip
#: The configurations of the 3-seed run (the default of ``--configs``).
FINAL = [
    "ppo-128x8-mb384-e3-lr1e-3",
    "ppo-128x8-mb512-e3-lr1e-3",
    "ppo-128x8-mb512-e4-lr1e-3",
    "ppo-64x16-mb256-e4-lr1e-3",
    "grpo-32x8-mixed-lr1e-3",
]


#: The cheaper policy and the lean loop (two seeds; fast_path_sweep_small.json).
CHEAPER = [name for name in CONFIGS if name.endswith("-small") or name.startswith("batched-")]


def apply_model_settings(model: Any, settings: dict[str, Any]) -> None:
    """Set ``settings`` (names in MODEL_KNOBS) on a model from ``build_loop``, before ``learn``."""
    from stable_baselines3.common.utils import FloatSchedule

    from agents.grpo import GroupPPO

    for name, value in settings.items():
        if name not in MODEL_KNOBS:
            raise ValueError(f"model setting {name!r} is not one of {MODEL_KNOBS}")
        if name == "learning_rate":  # both trainers read lr_schedule at every update
            model.learning_rate, model.lr_schedule = value, FloatSchedule(value)
        elif name == "clip_range":
            if isinstance(model, GroupPPO):
                model.clip_range_value = value
            else:
                model.clip_range = FloatSchedule(value)
        elif name == "kl_coef" and not isinstance(model, GroupPPO):
            raise ValueError(f"{name} is a group-trainer setting, not {type(model).__name__}'s")
        else:
            setattr(model, name, value)


def run(name: str, seed: int, steps: int, difficulty: float) -> dict[str, Any]:
    """Train one configuration for ``steps`` env steps, then evaluate it on held-out tasks."""
    fields = dict(CONFIGS[name])
    model_settings = fields.pop("model", {})
    model, settings, learn = build(fields, seed, difficulty)
    apply_model_settings(model, model_settings)
    start, cpu_start = time.perf_counter(), time.process_time()
    learn(steps)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return result_row(name, seed, model, settings, seconds, cpu_seconds=round(cpu_seconds, 1),
                      steps_per_cpu_second=round(model.num_timesteps / cpu_seconds))  # fmt: skip


def summarise(names: list[str], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration: median steps/s, its ratio to the first (baseline), success per seed."""
    summary = []
    for name in names:
        rows = [r for r in runs if r["config"] == name]
        summary.append({
            "config": name, "settings": CONFIGS[name],
            "steps_per_second": round(float(np.median([r["steps_per_second"] for r in rows]))),
            "steps_per_cpu_second": round(float(np.median([r["steps_per_cpu_second"] for r in rows]))),
            "seeds": [r["seed"] for r in rows],
            "stochastic": [r["stochastic"] for r in rows], "greedy": [r["greedy"] for r in rows],
            "stochastic_mean": round(float(np.mean([r["stochastic"] for r in rows])), 3),
            "greedy_mean": round(float(np.mean([r["greedy"] for r in rows])), 3),
        })  # fmt: skip
    base = summary[0]
    for row in summary:
        row["ratio"] = round(row["steps_per_second"] / base["steps_per_second"], 2)
        row["cpu_ratio"] = round(row["steps_per_cpu_second"] / base["steps_per_cpu_second"], 2)
        row["within_baseline_spread"] = row["stochastic_mean"] >= min(base["stochastic"])
    return summary


def print_table(summary: list[dict[str, Any]]) -> None:
    print("| config | steps/s (median) | x baseline | x baseline, CPU time | held-out stochastic (per seed) "
          "| mean | greedy mean |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for row in summary:
        seeds = " / ".join(f"{v:.2f}" for v in row["stochastic"])
        print(f"| {row['config']} | {row['steps_per_second']:,} | {row['ratio']} | {row['cpu_ratio']} | "
              f"{seeds} | {row['stochastic_mean']:.2f} | {row['greedy_mean']:.2f} |")  # fmt: skip


def main() -> None:
    parser = run_parser(__doc__)
    parser.add_argument("--configs", nargs="+", default=FINAL, choices=list(CONFIGS), metavar="NAME",
                        help="configurations to run (the baseline is always run, first)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    baseline = next(iter(CONFIGS))
    names = [baseline, *(n for n in dict.fromkeys(args.configs) if n != baseline)]
    load = os.getloadavg()[0]
    runs = []
    for k, seed in enumerate(args.seeds):
        for name in names if k % 2 == 0 else names[::-1]:
            runs.append(run(name, seed, args.steps, args.difficulty))
            print(runs[-1], flush=True)
    summary = summarise(names, runs)
    print_table(summary)
    payload = {
        "command": " ".join(["python benchmarks/fast_path_sweep.py", *map(_quote, sys.argv[1:])]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs (load average "
        f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end), Python "
        f"{platform.python_version()}, torch {torch.__version__}, 1 torch thread",
        "steps": args.steps, "difficulty": args.difficulty, "summary": summary, "runs": runs,
    }  # fmt: skip
    args.out.write_text(json.dumps(payload, indent=1) + "\n")


def _quote(arg: str) -> str:
    return f"'{arg}'" if any(c in arg for c in " (),") else arg


if __name__ == "__main__":
    main()
