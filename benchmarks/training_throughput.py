"""End-to-end training steps/s and held-out success of each training path, in one process.

    python benchmarks/training_throughput.py [--steps 100000] [--seeds 0 1 2] [--difficulty 0.25]

Every configuration trains Outcome-only on RLA-TextNav-v0 at a fixed difficulty (and the
closed loop, mode ``env``, where a row says so) with ``agents.loop.build_loop`` and
``model.learn``, or, in the Outcome-only rows that say so, with ``agents.batched_ppo.BatchedPPO``; steps/s
is env steps over the wall time of ``learn`` (one torch thread, no evaluation inside), and over
the process's CPU time (which other jobs on a shared machine disturb far less). Held-out
success afterwards: the stochastic policy (primary) and the greedy one on 100 held-out tasks at
the training difficulty. Runs go one at a time, seed by seed, the order reversed on every
other seed, so the figures compare paths on the same machine in the same run. Results:
``benchmarks/results/training_throughput.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent

#: name -> LoopSettings fields; the first is what `rla bench --preset ''` runs per run (its default before
#: ``--preset auto``, as the label says).
#: The anchors' PPO settings for many envs (minibatches in the thousands, few epochs, an entropy bonus).
WIDE = {"algo": "ppo", "n_envs": 64, "n_steps": 128, "batch_size": 2048, "n_epochs": 4, "ent_coef": 0.01}
#: The fast path chosen by benchmarks/fast_path_sweep.py: learning per step matches the first row.
FAST = {"algo": "ppo", "vec_env": "batched", "n_envs": 128, "n_steps": 8, "batch_size": 512, "n_epochs": 4,
        "learning_rate": 1e-3}  # fmt: skip
#: agents.batched_ppo.BatchedPPO's arguments (its Outcome-only rows build it directly; the closed loop's
#: row runs it as LoopSettings' algo batched-ppo, with the same fields).
LEAN = {"n_steps": 4, "batch_size": 512, "n_epochs": 4, "learning_rate": 1e-3, "encoder": "flatten-small"}
CONFIGS: dict[str, dict[str, Any]] = {
    "ppo, 4 DummyVecEnv envs, n_steps 256, batch 256, 10 epochs (rla bench's default PPO)": {"algo": "ppo"},
    "ppo, 64 batched envs, n_steps 128, batch 2048, 4 epochs, ent 0.01": {**WIDE, "vec_env": "batched"},
    "ppo, 128 batched envs, n_steps 8, batch 512, 4 epochs, lr 1e-3 (fast path)": FAST,
    "ppo fast path, encoder flatten-small (8-d embeddings, 64 features, one 64-unit layer per head)":
        {**FAST, "encoder": "flatten-small"},
    "batched ppo (agents.batched_ppo), 128 array-state envs x 8 steps, otherwise as the row above":
        {"batched_ppo": {**LEAN, "n_envs": 128, "n_steps": 8}},
    "batched ppo (agents.batched_ppo), 256 array-state envs x 4 steps, otherwise as the row above":
        {"batched_ppo": {**LEAN, "n_envs": 256}},
    "grpo, 8 x 8 DummyVecEnv envs": {"algo": "grpo"},
    "grpo, 32 x 8 batched envs (array state)": {"algo": "grpo", "vec_env": "batched", "groups": 32},
    "ppo fast path, closed loop (mode env)": {**FAST, "mode": "env"},
    "grpo, 32 x 8 batched envs, closed loop (mode env)": {"algo": "grpo", "vec_env": "batched", "groups": 32,
                                                           "mode": "env"},
    "ppo --preset fast (flatten-small, PRM 8-d / 64 units), closed loop (mode env)":
        {"preset": "fast", "mode": "env"},
    "batched ppo, 256 array-state envs x 4 steps as above, closed loop (mode env, PRM 8-d / 64 units)":
        {"algo": "batched-ppo", "n_envs": 256, **LEAN, "prm_embed_dim": 8, "prm_hidden": 64, "mode": "env"},
}  # fmt: skip


def build(fields: dict[str, Any], seed: int, difficulty: float) -> tuple[Any, Any, Callable[[int], Any]]:
    """One configuration's model, the LoopSettings its evaluation reads, and ``learn(steps)``.

    ``fields``: LoopSettings fields, or ``{"batched_ppo": BatchedPPO's arguments}`` (evaluated
    as PPO at the same difficulty). Outcome-only unless ``fields`` set ``mode``.
    """
    from agents.batched_ppo import BatchedPPO
    from agents.loop import LoopSettings, build_loop

    fields = {"mode": "outcome", **fields}
    lean = fields.pop("batched_ppo", None)
    if lean is not None:
        fields = {"mode": "outcome", "algo": "ppo", "n_envs": lean["n_envs"], "encoder": lean["encoder"]}
    settings = LoopSettings(
        env="RLA-TextNav-v0", difficulty=difficulty, max_difficulty=difficulty, seed=seed, device="cpu",
        **fields,
    )  # fmt: skip
    if lean is not None:
        model: Any = BatchedPPO(settings.env, difficulty=difficulty, seed=seed, **lean)
        return model, settings, model.learn
    model, loop = build_loop(settings)
    return model, settings, lambda steps: model.learn(steps, callback=loop)


def run(name: str, seed: int, steps: int, difficulty: float) -> dict[str, Any]:
    """Train one configuration for ``steps`` env steps, then evaluate it on held-out tasks."""
    model, settings, learn = build(CONFIGS[name], seed, difficulty)
    start, cpu_start = time.perf_counter(), time.process_time()
    learn(steps)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return result_row(name, seed, model, settings, seconds, cpu_seconds=round(cpu_seconds, 1),
                      steps_per_cpu_second=round(model.num_timesteps / cpu_seconds))  # fmt: skip


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
    load = os.getloadavg()[0]
    runs = []
    for k, seed in enumerate(args.seeds):  # the order reversed every other seed: load drifts fall alike
        for name in names if k % 2 == 0 else names[::-1]:
            runs.append(run(name, seed, args.steps, args.difficulty))
            print(runs[-1], flush=True)
    summary = []
    for name in names:
        rows = sorted((r for r in runs if r["config"] == name), key=lambda r: args.seeds.index(r["seed"]))
        summary.append({
            "config": name,
            "steps_per_second": round(float(np.median([r["steps_per_second"] for r in rows]))),
            "steps_per_cpu_second": round(float(np.median([r["steps_per_cpu_second"] for r in rows]))),
            "stochastic": [r["stochastic"] for r in rows], "greedy": [r["greedy"] for r in rows],
        })  # fmt: skip
    base = summary[0]
    print("| path | steps/s (median) | x first row | x first row, CPU time | held-out stochastic (per seed) "
          "| greedy |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for row in summary:
        row["ratio"] = round(row["steps_per_second"] / base["steps_per_second"], 2)
        row["cpu_ratio"] = round(row["steps_per_cpu_second"] / base["steps_per_cpu_second"], 2)
        seeds = " / ".join(f"{v:.2f}" for v in row["stochastic"])
        print(f"| {row['config']} | {row['steps_per_second']:,} | {row['ratio']} | {row['cpu_ratio']} | "
              f"{seeds} | {np.mean(row['greedy']):.2f} |")  # fmt: skip
    payload = {
        "command": " ".join(sys.argv).replace(sys.argv[0], "python benchmarks/training_throughput.py"),
        "machine": f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
        f"{os.cpu_count()} cores shared with other jobs (load average {load:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end), 1 torch thread",
        "summary": summary, "runs": runs,
    }  # fmt: skip
    (ROOT / "benchmarks" / "results" / "training_throughput.json").write_text(
        json.dumps(payload, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
