"""Does consistency training raise a learned PRM's vote quality mu when it starts from a prior?

    python benchmarks/prm_prior.py [--seeds 0 1 2] [--steps 60000] [--priors 1.2 1.5]

A step-head PRM is first trained (supervised) on RLA-TextNav-v0 steps whose labels are the
exact ones, each flipped with probability 1 - mu0 / 2: its votes then start near quality
mu0 = p+ + p- (label-based: p+ = P(vote +1 | optimal step), p- = P(vote -1 | other step)).
The loop then runs in mode ``reward`` (PPO, the PRM trained by ``--objective`` on the
policy's own episodes, fixed difficulty 0.25) and mu is measured again on the same held-out
steps. Mode ``policy`` (the PRM frozen) is the control. Results:
``benchmarks/results/prm_prior.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENV = "RLA-TextNav-v0"
DIFFICULTY = 0.25


def label_mu(prm: Any, trajectories: list[Any]) -> float:
    """p+ + p- of the PRM's sampled votes against the exact step labels (from vote probabilities)."""
    import numpy as np
    import torch

    with torch.no_grad():
        p = torch.sigmoid(prm.logits(prm.steps(trajectories))).cpu().numpy()
    labels = np.concatenate([t.labels for t in trajectories])
    return float(p[labels > 0].mean() + (1 - p[labels < 0]).mean())


def run(job: tuple[float, str, str, int, int]) -> dict[str, Any]:
    mu0, objective, mode, seed, steps = job
    import numpy as np
    import torch

    from agents.loop import LoopSettings, build_loop
    from agents.reward_model import PRMTrainer, ProcessRewardModel
    from agents.trajectories import collect_mixture_trajectories

    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    train = collect_mixture_trajectories(ENV, DIFFICULTY, tasks=150, rollouts_per_task=4, seed=seed)
    heldout = collect_mixture_trajectories(
        ENV, DIFFICULTY, tasks=50, rollouts_per_task=4, seed=seed + 100, task_seed_offset=500_000
    )
    noisy = [
        dataclasses.replace(t, labels=np.where(rng.random(len(t)) < mu0 / 2, t.labels, -t.labels))
        for t in train
    ]
    settings = LoopSettings(
        env=ENV, algo="ppo", mode=mode, objective=objective, difficulty=DIFFICULTY, seed=seed, device="cpu"
    )
    model, loop = build_loop(settings)
    prm = loop.reward_env.prm
    prior = ProcessRewardModel.for_env(model.env.envs[0], head="step", seed=seed, device="cpu")
    PRMTrainer(prior, "supervised", seed=seed).update(noisy, epochs=30)
    prm.load_state_dict(prior.state_dict())
    before = label_mu(prm, heldout)
    start = time.perf_counter()
    model.learn(steps, callback=loop)
    return {
        "mu0": mu0, "objective": objective, "mode": mode, "seed": seed,
        "mu_before": round(before, 3), "mu_after": round(label_mu(prm, heldout), 3),
        "rm_mu_by_outcome_last": loop.history[-1].get("rm/mu") if loop.history else None,
        "training_success_last_5": float(np.mean([row["loop/success"] for row in loop.history[-5:]])),
        "seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60_000)
    parser.add_argument("--priors", type=float, nargs="+", default=[1.2, 1.5])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    arms = [("consistency", "reward"), ("consistency-balanced", "reward"), ("consistency", "policy")]
    jobs = [(mu0, o, mode, s, args.steps) for s in args.seeds for mu0 in args.priors for o, mode in arms]
    start = time.perf_counter()
    with Pool(args.workers) as pool:
        results = []
        for r in pool.imap(run, jobs):
            results.append(r)
            print(
                r["mu0"],
                r["objective"],
                r["mode"],
                r["seed"],
                r["mu_before"],
                "->",
                r["mu_after"],
                flush=True,
            )
    payload = {
        "command": " ".join(sys.argv).replace(sys.argv[0], "python benchmarks/prm_prior.py"),
        "wall_seconds": round(time.perf_counter() - start), "runs": results,
    }  # fmt: skip
    (ROOT / "benchmarks" / "results" / "prm_prior.json").write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
