"""How much an episode's outcome says about its steps, in the loop's data and in the PRM's offline data.

    python benchmarks/prm_data_signal.py [--seed 0] [--steps 100000] [--encoder lookup]

An outcome-trained PRM can only learn step quality where the outcome depends on it. This
measures that dependence with the exact step labels, for two data sets on RLA-TextNav-v0 at
one difficulty:

- the closed loop's own episodes (mode ``reward`` by default, MaskablePPO), pooled per window
  of training steps;
- held-out oracle/random mixtures, the data on which the PRM learns offline (``prm.md``).

Per data set: the label mu, p+ + p- with the exact labels as the votes (p+ = share of optimal
steps in successful episodes, p- = share of non-optimal steps in failed ones): the mu a
perfect PRM would have, so Theorem 1's margin mu - 1 that any PRM can reach on this data;
and the AUC of an episode's share of optimal steps as a predictor of its outcome.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.bench import HELDOUT_SEED_START, RM_SEED_OFFSET
from agents.loop import LoopSettings, build_loop
from agents.reward_model import auc
from agents.trajectories import Trajectory, collect_mixture_trajectories
from rla_gym.stats import vote_statistics


def signal(trajectories: list[Trajectory]) -> dict[str, float]:
    """Label mu and the AUC of the optimal-step share against the outcome."""
    labels = np.concatenate([t.labels for t in trajectories])
    outcomes = np.array([t.outcome for t in trajectories])
    stats = vote_statistics(labels, np.repeat(outcomes, [len(t) for t in trajectories]))
    share = np.array([float(np.mean(t.labels > 0)) for t in trajectories])
    return {
        "episodes": len(trajectories),
        "success": float(np.mean(outcomes > 0)),
        "label_p_plus": stats["p_plus"],
        "label_p_minus": stats["p_minus"],
        "label_mu": stats["mu"],
        "label_plus_share": float(np.mean(labels > 0)),
        "mean_length": float(np.mean([len(t) for t in trajectories])),
        "share_auc": auc(share, outcomes),
    }


def loop_windows(settings: LoopSettings, steps: int, window: int) -> tuple[list[dict[str, Any]], list[float]]:
    """Train the loop; return the signal of its episodes per ``window`` steps and the PRM's rollout mu."""
    model, callback = build_loop(settings)
    env = callback.reward_env
    pooled: dict[int, list[Trajectory]] = {}
    drain = env.drain

    def recording_drain() -> list[Trajectory]:
        finished = drain()
        pooled.setdefault((model.num_timesteps - 1) // window, []).extend(finished)
        return finished

    env.drain = recording_drain  # type: ignore[method-assign]
    model.learn(steps, callback=callback)
    rows = [
        {"steps": f"{k * window}-{(k + 1) * window}", **signal(v)} for k, v in sorted(pooled.items()) if v
    ]
    return rows, [row["rm/mu"] for row in callback.history if "rm/mu" in row]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="RLA-TextNav-v0")
    parser.add_argument("--difficulty", type=float, default=0.25)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=20_000)
    parser.add_argument("--encoder", default="lookup")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mode", default="reward", help="loop mode (oracle: votes = the exact labels)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    mixtures = collect_mixture_trajectories(
        args.env, args.difficulty, tasks=150, rollouts_per_task=4, seed=args.seed,
        task_seed_offset=HELDOUT_SEED_START + RM_SEED_OFFSET,
    )  # fmt: skip
    reference = {"data": "oracle/random mixtures", **signal(mixtures)}
    print(json.dumps(reference), flush=True)
    settings = LoopSettings(
        env=args.env, algo="maskable-ppo", encoder=args.encoder, mode=args.mode, process_scale="episode",
        difficulty=args.difficulty, max_difficulty=max(args.difficulty, 0.5), seed=args.seed, device="cpu",
    )  # fmt: skip
    windows, rollout_mu = loop_windows(settings, args.steps, args.window)
    for row in windows:
        print(json.dumps(row), flush=True)
    result = {
        "meta": {
            "command": f"python benchmarks/prm_data_signal.py --env {args.env} --seed {args.seed} "
            f"--steps {args.steps} --encoder {args.encoder} --difficulty {args.difficulty} "
            f"--mode {args.mode}",
            "env": args.env,
            "date": time.strftime("%Y-%m-%d"),
            "seconds": round(time.perf_counter() - start, 1),
        },
        "mixtures": reference,
        "loop": windows,
        "prm_rollout_mu_last10": float(np.mean(rollout_mu[-10:])) if rollout_mu else float("nan"),
    }
    default = f"prm_data_signal_s{args.seed}.json"  # the first runs: TextNav, mode reward
    if (args.env, args.mode) != ("RLA-TextNav-v0", "reward"):
        default = f"prm_data_signal_{args.env}_{args.mode}_s{args.seed}.json"
    out = args.out or Path("benchmarks/results") / default
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
