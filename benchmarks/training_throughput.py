"""End-to-end training steps/s and held-out success of each training path, in one process.

    python benchmarks/training_throughput.py [--steps 100000] [--seeds 0 1 2] [--difficulty 0.25]

Every configuration trains Outcome-only on RLA-TextNav-v0 at a fixed difficulty (and the
closed loop, mode ``env``, where a row says so) with ``agents.loop.build_loop`` and
``model.learn``; steps/s is env steps over the wall time of ``learn`` (one torch thread, no
evaluation inside). Held-out success afterwards: the stochastic policy (primary) and the
greedy one on 100 held-out tasks at the training difficulty. Runs go one at a time, so the
figures compare paths on the same machine in the same run. Results:
``benchmarks/results/training_throughput.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent

#: name -> LoopSettings fields; the first is what `rla bench` runs per run today.
#: The anchors' PPO settings for many envs (minibatches in the thousands, few epochs, an entropy bonus).
WIDE = {"algo": "ppo", "n_envs": 64, "n_steps": 128, "batch_size": 2048, "n_epochs": 4, "ent_coef": 0.01}
#: The fast path chosen by benchmarks/fast_path_sweep.py: learning per step matches the first row.
FAST = {"algo": "ppo", "vec_env": "batched", "n_envs": 128, "n_steps": 8, "batch_size": 512, "n_epochs": 4,
        "learning_rate": 1e-3}  # fmt: skip
CONFIGS: dict[str, dict[str, Any]] = {
    "ppo, 4 DummyVecEnv envs, n_steps 256, batch 256, 10 epochs (rla bench today)": {"algo": "ppo"},
    "ppo, 64 batched envs, n_steps 128, batch 2048, 4 epochs, ent 0.01": {**WIDE, "vec_env": "batched"},
    "ppo, 128 batched envs, n_steps 8, batch 512, 4 epochs, lr 1e-3 (fast path)": FAST,
    "grpo, 8 x 8 DummyVecEnv envs": {"algo": "grpo"},
    "grpo, 32 x 8 batched envs (array state)": {"algo": "grpo", "vec_env": "batched", "groups": 32},
    "ppo fast path, closed loop (mode env)": {**FAST, "mode": "env"},
    "grpo, 32 x 8 batched envs, closed loop (mode env)": {"algo": "grpo", "vec_env": "batched", "groups": 32,
                                                           "mode": "env"},
}  # fmt: skip


def run(name: str, seed: int, steps: int, difficulty: float) -> dict[str, Any]:
    """Train one configuration for ``steps`` env steps, then evaluate it on held-out tasks."""
    from agents.loop import LoopSettings, build_loop

    fields = {"mode": "outcome", **CONFIGS[name]}
    settings = LoopSettings(
        env="RLA-TextNav-v0",
        difficulty=difficulty,
        max_difficulty=difficulty,
        seed=seed,
        device="cpu",
        **fields,
    )
    model, loop = build_loop(settings)
    start = time.perf_counter()
    model.learn(steps, callback=loop)
    return result_row(name, seed, model, settings, time.perf_counter() - start)


def result_row(
    name: str, seed: int, model: Any, settings: Any, seconds: float, **timings: float
) -> dict[str, Any]:
    """One run's row: env steps and steps/s over ``seconds`` (the wall time of ``learn``), any
    further ``timings``, then the held-out success of the stochastic policy (primary) and the greedy
    one on 100 held-out tasks at the training difficulty (``settings``: the run's LoopSettings)."""
    from agents.train import TrainSettings, evaluate_policy

    evaluation = TrainSettings(**dataclasses.asdict(settings), eval_episodes=100)
    (stochastic,) = evaluate_policy(model, evaluation, (settings.difficulty,), deterministic=False)
    (greedy,) = evaluate_policy(model, evaluation, (settings.difficulty,), deterministic=True)
    return {
        "config": name, "seed": seed, "steps": int(model.num_timesteps), "seconds": round(seconds, 1),
        "steps_per_second": round(model.num_timesteps / seconds), **timings,
        "stochastic": stochastic["success"], "greedy": greedy["success"],
    }  # fmt: skip


def run_parser(description: str) -> argparse.ArgumentParser:
    """A parser with the options of the runs, ``--steps``, ``--seeds`` and ``--difficulty``
    (fast_path_sweep.py's too)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--difficulty", type=float, default=0.25)
    return parser


def main() -> None:
    parser = run_parser(__doc__)
    parser.add_argument("--configs", nargs="+", default=list(range(len(CONFIGS))), type=int)
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = [list(CONFIGS)[k] for k in args.configs]
    runs = []
    for seed in args.seeds:
        for name in names:
            runs.append(run(name, seed, args.steps, args.difficulty))
            print(runs[-1], flush=True)
    summary = []
    for name in names:
        rows = [r for r in runs if r["config"] == name]
        summary.append({
            "config": name,
            "steps_per_second": round(float(np.median([r["steps_per_second"] for r in rows]))),
            "stochastic": [r["stochastic"] for r in rows], "greedy": [r["greedy"] for r in rows],
        })  # fmt: skip
    base = summary[0]["steps_per_second"]
    print("| path | steps/s (median) | x first row | held-out stochastic (per seed) | greedy |")
    print("|---|---|---|---|---|")
    for row in summary:
        row["ratio"] = round(row["steps_per_second"] / base, 2)
        seeds = " / ".join(f"{v:.2f}" for v in row["stochastic"])
        print(f"| {row['config']} | {row['steps_per_second']:,} | {row['ratio']} | {seeds} | "
              f"{np.mean(row['greedy']):.2f} |")  # fmt: skip
    payload = {
        "command": " ".join(sys.argv).replace(sys.argv[0], "python benchmarks/training_throughput.py"),
        "machine": f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
        "2 shared cores, 1 torch thread",
        "summary": summary, "runs": runs,
    }  # fmt: skip
    (ROOT / "benchmarks" / "results" / "training_throughput.json").write_text(
        json.dumps(payload, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
