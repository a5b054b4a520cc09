"""How each env's difficulty bites: random success, optimal length and step budget per level.

    python benchmarks/difficulty_curve.py [--envs ID ...] [--episodes 2000] [--out FILE.json]

A curriculum can only follow a learner across a difficulty range where success falls gradually;
a level where a new skill appears at once shows here as a drop of random success and a jump of
the optimal length. Each level runs 256 sub-envs of the batched vector env with uniformly random
admissible commands (read from ``info["action_mask"]``) until ``--episodes`` episodes have ended;
the optimal length and the budget are the means over the first tasks of the sub-envs (seed 0).
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import rla_gym

LEVELS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6, 0.8, 1.0)


def curve(env_id: str, levels: tuple[float, ...], episodes: int, num_envs: int = 256) -> list[dict[str, Any]]:
    """Random success, mean optimal length and mean budget of ``env_id`` at each level."""
    rows = []
    for d in levels:
        envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", difficulty=d)
        _, info = envs.reset(seed=0)
        optimal, budget = float(info["optimal_len"].mean()), float(info["step_budget"].mean())
        rng = np.random.default_rng(0)
        ended = solved = 0
        while ended < episodes:
            mask = info["action_mask"]
            _, _, terminated, truncated, info = envs.step((rng.random(mask.shape) * mask).argmax(axis=1))
            ended += int((terminated | truncated).sum())
            solved += int(terminated.sum())
        envs.close()
        rows.append(
            {"difficulty": d, "random_success": round(solved / ended, 3), "episodes": ended,
             "optimal_len": round(optimal, 2), "step_budget": round(budget, 2)}
        )  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", nargs="+", default=list(rla_gym.ENV_IDS), choices=list(rla_gym.ENV_IDS))
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.episodes < 1:
        parser.error(f"--episodes must be at least 1, got {args.episodes}")
    results: dict[str, Any] = {
        "command": "python benchmarks/difficulty_curve.py " + " ".join(
            ["--envs", *args.envs, "--episodes", str(args.episodes)]
        ),
        "machine": f"{platform.machine()}, Python {platform.python_version()}",
        "envs": {},
    }  # fmt: skip
    for env_id in args.envs:
        rows = curve(env_id, LEVELS, args.episodes)
        results["envs"][env_id] = rows
        print(f"\n{env_id}\n| difficulty | random success | optimal length | step budget |")
        print("|---:|---:|---:|---:|")
        for row in rows:
            print(
                f"| {row['difficulty']:.2f} | {row['random_success']:.3f} | {row['optimal_len']:.1f} "
                f"| {row['step_budget']:.1f} |"
            )
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
