"""Wall time per env step of the closed loop against plain SB3 PPO, and PRM scoring throughput.

    python benchmarks/loop_overhead.py [--steps 20480] [--rounds 3]

Both runs: PPO with ``TokenPolicy``, 4 DummyVecEnv envs, n_steps 256, batch 256, one torch
thread, on RLA-TextNav-v0. Plain PPO trains at d = 0.2 on the env reward; the loop (mode
``env``) adds PRM votes every step, PRM training every rollout and the task-pool curriculum.
PRM throughput: steps scored per second at batch 4096 (votes, m = 3) on the CPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import gymnasium as gym
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import rla_gym  # noqa: F401
from agents.loop import LoopSettings, build_loop
from agents.policies import TokenPolicy
from agents.reward_model import ProcessRewardModel


def plain(steps: int, seed: int) -> float:
    venv = make_vec_env("RLA-TextNav-v0", n_envs=4, seed=seed, env_kwargs={"difficulty": 0.2})
    model = PPO(TokenPolicy, venv, n_steps=256, batch_size=256, seed=seed, device="cpu")
    start = time.perf_counter()
    model.learn(steps)
    return (time.perf_counter() - start) / model.num_timesteps


def loop(steps: int, seed: int) -> float:
    model, callback = build_loop(LoopSettings(algo="ppo", n_envs=4, n_steps=256, seed=seed, device="cpu"))
    start = time.perf_counter()
    model.learn(steps, callback=callback)
    return (time.perf_counter() - start) / model.num_timesteps


def prm_throughput(head: str, batch: int = 4096, repeats: int = 20) -> float:
    prm = ProcessRewardModel.for_env(gym.make("RLA-TextNav-v0"), head=head, device="cpu", seed=0)
    steps = {
        "obs": torch.randint(1, 47, (batch, 69)),
        "action": torch.randint(0, 24, (batch,)),
        "next_obs": torch.randint(1, 47, (batch, 69)),
    }
    prm.votes(steps, 3)  # warm up
    start = time.perf_counter()
    for _ in range(repeats):
        prm.votes(steps, 3)
    return batch * repeats / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=20_480)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/loop_overhead.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    times: dict[str, list[float]] = {"plain PPO": [], "closed loop (mode env)": []}
    for round_ in range(args.rounds):
        times["plain PPO"].append(plain(args.steps, round_))
        times["closed loop (mode env)"].append(loop(args.steps, round_))
    base = statistics.median(times["plain PPO"])
    print("| run | ms per env step (median) | runs | x plain PPO |")
    print("|---|---:|---|---:|")
    rows = []
    for name, values in times.items():
        median = statistics.median(values)
        rows.append(
            {
                "run": name,
                "ms_per_step": round(1000 * median, 4),
                "runs_ms": [round(1000 * v, 4) for v in values],
                "ratio": round(median / base, 3),
            }
        )
        runs = " / ".join(f"{1000 * v:.3f}" for v in values)
        print(f"| {name} | {1000 * median:.3f} | {runs} | {median / base:.2f} |")
    throughput = {head: round(prm_throughput(head)) for head in ("step", "value")}
    for head, value in throughput.items():
        print(f"PRM scoring ({head} head), batch 4096, CPU, 1 thread: {value:,} steps/s")
    meta = {
        "command": "python benchmarks/loop_overhead.py",
        "steps": args.steps,
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"meta": meta, "rows": rows, "prm_steps_per_s": throughput}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
