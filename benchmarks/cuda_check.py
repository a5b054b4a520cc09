"""The trainers and the PRM on CUDA: placement and steps/s of a short loop per path.

    python benchmarks/cuda_check.py [--steps 20000]

Without a CUDA device it says so and exits 0 (nothing to check). With one, every path
(PPO and the group trainer, Outcome-only and the closed loop) trains on ``--device cuda``;
the check fails if the policy or the PRM has a parameter off the device after training, and
records steps/s to ``benchmarks/results/cuda_check.json`` with the device's name.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("CUDA is not available on this machine: the CUDA check is skipped (run it where a GPU is).")
        return 0
    from agents.loop import LoopSettings, build_loop

    torch.set_num_threads(1)
    rows = []
    paths = [
        (
            "ppo",
            "outcome",
            {"vec_env": "batched", "n_envs": 64, "n_steps": 128, "batch_size": 2048, "n_epochs": 4},
        ),
        (
            "ppo",
            "env",
            {"vec_env": "batched", "n_envs": 64, "n_steps": 128, "batch_size": 2048, "n_epochs": 4},
        ),
        ("grpo", "outcome", {"vec_env": "batched"}),
        ("grpo", "env", {"vec_env": "batched"}),
    ]
    failures = []
    for algo, mode, extra in paths:
        settings = LoopSettings(algo=algo, mode=mode, difficulty=0.25, device="cuda", seed=0, **extra)
        model, loop = build_loop(settings)
        start = time.perf_counter()
        model.learn(args.steps, callback=loop)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        modules = {"policy": model.policy}
        if loop.reward_env.prm is not None:
            modules["prm"] = loop.reward_env.prm
        off = [
            f"{name}.{p}"
            for name, m in modules.items()
            for p, t in m.named_parameters()
            if t.device.type != "cuda"
        ]
        if off:
            failures.append(f"{algo}/{mode}: parameters off the GPU: {off[:5]}")
        rate = round(model.num_timesteps / seconds)
        rows.append(
            {"algo": algo, "mode": mode, "steps": int(model.num_timesteps), "seconds": round(seconds, 1),
             "steps_per_second": rate, "on_cuda": not off}
        )  # fmt: skip
        print(rows[-1], flush=True)
    payload = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}
    (ROOT / "benchmarks" / "results" / "cuda_check.json").write_text(json.dumps(payload, indent=1) + "\n")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
