"""CPU time per env step of the lean loop's env-side layers, one layer added at a time.

    python benchmarks/loop_stack.py [--steps 2000] [--rounds 2] [--out FILE.json]

The stack ``BatchedPPO`` builds for ``rla train --preset lean`` (mode ``env``), without the
policy: 256 array-state TextNav sub-envs at d = 0.25 (SAME_STEP autoreset, no oracle mask), then
``FeedbackVectorWrapper`` with the preset's PRM (value head, 8-d embeddings, 64 units; votes drawn
every 4 steps, as one rollout), then ``CurriculumVectorWrapper`` with the loop's task pool (below
d = 0.25). Uniformly random admissible actions; one torch thread. Each layer's cost is the
difference to the row before it; the curriculum's also holds the shorter episodes it serves.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

import rla_gym  # noqa: F401
from agents.batched_loop import FeedbackVectorWrapper
from agents.loop import LoopSettings, _curriculum
from agents.reward_model import ProcessRewardModel
from rla_gym.wrappers.vector import CurriculumVectorWrapper

N_ENVS, ROLLOUT = 256, 4
LAYERS = ("env", "+ feedback (PRM votes, trajectories)", "+ curriculum (task pool)")


def make(layers: int) -> Any:
    envs: Any = gym.make_vec(
        "RLA-TextNav-v0", num_envs=N_ENVS, vectorization_mode="vector_entry_point",
        autoreset_mode=AutoresetMode.SAME_STEP, difficulty=0.25, oracle_info=False,
    )  # fmt: skip
    if layers >= 1:
        prm = ProcessRewardModel.for_env(
            gym.make("RLA-TextNav-v0"), head="value", embed_dim=8, hidden=64, device="cpu", seed=0
        )
        envs = FeedbackVectorWrapper(envs, prm, mode="env", lam=1.0, m=3)
    if layers >= 2:
        settings = LoopSettings(difficulty=0.25, max_difficulty=0.25, seed=0, device="cpu", preset="lean")
        envs = CurriculumVectorWrapper(envs, _curriculum(settings))
    return envs


def cpu_us_per_step(layers: int, steps: int) -> float:
    envs = make(layers)
    feedback = envs if layers == 1 else getattr(envs, "env", None)
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=0)
    start = time.process_time()
    for k in range(steps):
        mask = obs["action_mask"]
        obs, *_ = envs.step((rng.random(mask.shape) * mask).argmax(axis=1))
        if layers >= 1 and k % ROLLOUT == ROLLOUT - 1:
            feedback.finish_rollout()
            feedback.drain()
    return (time.process_time() - start) / (steps * N_ENVS) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs: dict[str, list[float]] = {name: [] for name in LAYERS}
    for _ in range(args.rounds):  # rounds interleave the layers, so each sees the same load
        for layers, name in enumerate(LAYERS):
            runs[name].append(round(cpu_us_per_step(layers, args.steps), 2))
    medians = {name: statistics.median(values) for name, values in runs.items()}
    print("| layers | CPU us per env step (median) | runs |\n|---|---:|---|")
    for name in LAYERS:
        print(f"| {name} | {medians[name]:.2f} | {runs[name]} |")
    if args.out is not None:
        payload = {
            "command": f"python benchmarks/loop_stack.py --steps {args.steps} --rounds {args.rounds}",
            "machine": f"{platform.machine()}, Python {platform.python_version()}, "
            f"torch {torch.__version__}, 2 shared cores, 1 torch thread",
            "cpu_us_per_env_step": runs,
        }
        args.out.write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
