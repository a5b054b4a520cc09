"""Wall time per env step of the closed loop against Outcome-only on the same path, and PRM throughput.

    python benchmarks/loop_overhead.py [--steps 30720] [--rounds 3]

Each path trains on RLA-TextNav-v0 at d = 0.25 (one torch thread, CPU) twice: Outcome-only
(mode ``outcome``: the env's reward, no PRM) and the closed loop (mode ``env``: PRM votes on
every step, PRM training and diagnostics every rollout, the task-pool curriculum). Paths:
the default PPO (4 DummyVecEnv envs, n_steps 256, batch 256, 10 epochs), the fast path
(``--preset fast``: PPO on 128 batched envs), the group trainer on 32 x 8 batched envs and the
lean batched PPO (``--preset lean``).
Runs alternate within each round, so a path's two modes see the same machine load; wall and
process (CPU) time are both recorded, the ratio of medians is reported.
PRM throughput: steps scored per second at batch 4096 (votes, m = 3) on the CPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import rla_gym  # noqa: F401
from agents.loop import LoopSettings, build_loop
from agents.reward_model import ProcessRewardModel

#: path -> LoopSettings fields (both modes run each)
PATHS: dict[str, dict[str, Any]] = {
    "ppo, 4 DummyVecEnv envs (defaults)": {"algo": "ppo"},
    "ppo fast path (--preset fast)": {"preset": "fast"},
    "grpo, 32 x 8 batched envs": {"algo": "grpo", "vec_env": "batched", "groups": 32},
    "batched ppo (--preset lean: 256 array-state envs x 4 steps)": {"preset": "lean"},
}
MODES = ("outcome", "env")


def timed(fields: dict[str, Any], mode: str, steps: int, seed: int) -> tuple[float, float]:
    """Wall and CPU seconds per env step of ``learn`` for one run."""
    settings = LoopSettings(
        env="RLA-TextNav-v0", difficulty=0.25, max_difficulty=0.25, mode=mode, seed=seed, device="cpu",
        **fields,
    )  # fmt: skip
    model, callback = build_loop(settings)
    wall, cpu = time.perf_counter(), time.process_time()
    model.learn(steps, callback=callback)
    n = model.num_timesteps
    return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


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
    parser.add_argument("--steps", type=int, default=30_720)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/loop_overhead.json"))
    parser.add_argument("--paths", type=int, nargs="+", default=list(range(len(PATHS))))
    args = parser.parse_args()
    paths = {name: PATHS[name] for name in (list(PATHS)[k] for k in args.paths)}
    torch.set_num_threads(1)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {(p, m): [] for p in paths for m in MODES}
    for round_ in range(args.rounds):
        for path, fields in paths.items():
            for mode in MODES:
                times[path, mode].append(timed(fields, mode, args.steps, round_))
                print(path, mode, times[path, mode][-1], flush=True)
    print("| path | Outcome-only ms/step | closed loop ms/step | x wall | x CPU |")
    print("|---|---:|---:|---:|---:|")
    rows = []
    for path in paths:
        wall = {m: statistics.median(w for w, _ in times[path, m]) for m in MODES}
        cpu = {m: statistics.median(c for _, c in times[path, m]) for m in MODES}
        row = {
            "path": path,
            "outcome_ms_per_step": round(1000 * wall["outcome"], 4),
            "loop_ms_per_step": round(1000 * wall["env"], 4),
            "ratio_wall": round(wall["env"] / wall["outcome"], 3),
            "ratio_cpu": round(cpu["env"] / cpu["outcome"], 3),
            "runs_ms": {m: [round(1000 * w, 4) for w, _ in times[path, m]] for m in MODES},
        }
        rows.append(row)
        print(f"| {path} | {row['outcome_ms_per_step']:.3f} | {row['loop_ms_per_step']:.3f} | "
              f"{row['ratio_wall']:.2f} | {row['ratio_cpu']:.2f} |")  # fmt: skip
    throughput = {head: round(prm_throughput(head)) for head in ("step", "value")}
    for head, value in throughput.items():
        print(f"PRM scoring ({head} head), batch 4096, CPU, 1 thread: {value:,} steps/s")
    meta = {
        "command": " ".join(["python benchmarks/loop_overhead.py", *sys.argv[1:]]),
        "machine": f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
        "2 shared cores, 1 torch thread",
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"meta": meta, "rows": rows, "prm_steps_per_s": throughput}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
