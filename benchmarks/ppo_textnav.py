"""Held-out success of SB3 PPO on RLA-TextNav-v0 against training steps.

    python benchmarks/ppo_textnav.py [--difficulty 0.0] [--seeds 0 1 2] [--steps 30000]

Compares the default ``MultiInputPolicy`` (an MLP on raw token ids) with the token
embedding extractor from ``agents.policies``. 4 DummyVecEnv envs, n_steps 256, batch 256,
other PPO settings SB3's defaults, one torch thread; evaluation every 5k steps on 200
held-out tasks with the greedy policy.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import rla_gym  # noqa: F401
from agents.policies import TokenFeaturesExtractor
from rla_gym.evaluation import evaluate, heldout_seeds

POLICIES = {
    "MultiInputPolicy (raw ids)": {},
    "TokenFeaturesExtractor": {"features_extractor_class": TokenFeaturesExtractor},
}


def curve(difficulty: float, seed: int, steps: int, policy_kwargs: dict) -> list[tuple[int, float]]:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=4, seed=seed, env_kwargs={"difficulty": difficulty})
    model = PPO("MultiInputPolicy", venv, n_steps=256, batch_size=256, seed=seed, policy_kwargs=policy_kwargs)
    env = gym.make("RLA-TextNav-v0")
    points = []
    while model.num_timesteps < steps:
        model.learn(5_000, reset_num_timesteps=False)
        result = evaluate(
            env, lambda o, i, r: int(model.predict(o, deterministic=True)[0]), difficulty, heldout_seeds(200)
        )
        points.append((model.num_timesteps, result.success_rate))
    return points


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--difficulty", type=float, default=0.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/ppo_textnav.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = []
    for name, kwargs in POLICIES.items():
        for seed in args.seeds:
            start = time.perf_counter()
            points = curve(args.difficulty, seed, args.steps, kwargs)
            results.append(
                {
                    "policy": name,
                    "seed": seed,
                    "curve": points,
                    "seconds": round(time.perf_counter() - start, 1),
                }
            )
            print(
                name,
                seed,
                " ".join(f"{s // 1000}k:{v:.2f}" for s, v in points),
                f"({results[-1]['seconds']} s)",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": "python benchmarks/ppo_textnav.py",
        "difficulty": args.difficulty,
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.write_text(json.dumps({"meta": meta, "runs": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
