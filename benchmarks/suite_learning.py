"""What a random agent and a short MaskablePPO run achieve on every env of the suite.

    python benchmarks/suite_learning.py [--steps 50000] [--levels 0.2 0.8] [--episodes 200]

Per env and difficulty: the success of a uniformly random admissible agent and of the exact
oracle on held-out tasks, then sb3-contrib MaskablePPO with ``MaskableTokenPolicy`` (flatten
encoder, 4 DummyVecEnv envs, n_steps 256, batch 256, defaults otherwise, one torch thread)
trained for ``--steps`` at that difficulty and evaluated greedily (masked) on the same tasks.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env

import rla_gym
from agents.policies import MaskableTokenPolicy
from rla_gym.evaluation import evaluate, heldout_seeds, oracle_agent, random_agent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--levels", type=float, nargs="+", default=[0.2, 0.8])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--envs", nargs="+", default=list(rla_gym.ENV_IDS))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/suite_learning.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    print("| env | d | optimal length | oracle | random | MaskablePPO | train time |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for env_id in args.envs:
        for level in args.levels:
            env = gym.make(env_id)
            seeds = heldout_seeds(args.episodes)
            oracle = evaluate(env, oracle_agent, level, seeds)
            random = evaluate(env, random_agent, level, seeds)
            venv = make_vec_env(env_id, n_envs=4, seed=0, env_kwargs={"difficulty": level})
            model = MaskablePPO(MaskableTokenPolicy, venv, n_steps=256, batch_size=256, seed=0)
            start = time.perf_counter()
            model.learn(args.steps)
            seconds = time.perf_counter() - start

            def agent(obs, info, rng, model=model) -> int:
                return int(model.predict(obs, deterministic=True, action_masks=info["action_mask"] == 1)[0])

            trained = evaluate(env, agent, level, seeds)
            row = {
                "env": env_id,
                "difficulty": level,
                "optimal_len": oracle.mean_optimal_len,
                "oracle": oracle.success_rate,
                "random": random.success_rate,
                "maskable_ppo": trained.success_rate,
                "train_seconds": round(seconds, 1),
            }
            rows.append(row)
            print(
                f"| {env_id} | {level} | {row['optimal_len']:.1f} | {row['oracle']:.2f} "
                f"| {row['random']:.2f} | {row['maskable_ppo']:.2f} | {seconds:.0f} s |",
                flush=True,
            )
    meta = {
        "command": "python benchmarks/suite_learning.py",
        "steps": args.steps,
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
