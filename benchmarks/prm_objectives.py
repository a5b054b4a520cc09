"""Balanced process accuracy and AUC of each PRM objective, trained from outcomes only.

    python benchmarks/prm_objectives.py [--difficulty 0.3] [--seeds 0 1 2] [--tasks 600] [--epochs 10]

Data: RLA-TextNav-v0 episodes of a mixture policy (exact oracle with probability p ~ U[0, 1]
per episode, else random admissible commands), 8 rollouts per task; training tasks and
held-out tasks never share task seeds. Each objective trains a fresh PRM on the same data
(``supervised`` on the exact labels, as an upper bound); metrics are measured on the
held-out trajectories before and after training.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym
import torch

import rla_gym  # noqa: F401
from agents.reward_model import OBJECTIVES, PRMTrainer, ProcessRewardModel, evaluate_prm
from agents.trajectories import collect_mixture_trajectories

ENV = "RLA-TextNav-v0"

KEYS = ("balanced_accuracy", "auc", "process_accuracy", "outcome_accuracy", "mu", "vote_plus_share")


def _round(metrics: dict) -> dict:
    return {k: round(metrics[k], 3) for k in KEYS}


def run(objective: str, train, test, seed: int, epochs: int, env: gym.Env, noop_logit: float | None) -> dict:
    head = "value" if objective == "value-difference" else "step"
    prm = ProcessRewardModel.for_env(env, head=head, seed=seed, device="cpu", noop_logit=noop_logit)
    before = evaluate_prm(prm, test, warn=False)
    start = time.perf_counter()
    PRMTrainer(prm, objective, seed=seed).update(train, epochs=epochs)
    seconds = round(time.perf_counter() - start, 1)
    after = evaluate_prm(prm, test, warn=False)
    return {
        "objective": objective,
        "seed": seed,
        "seconds": seconds,
        "before": _round(before),
        "after": _round(after),
    }


def rule_only(test, env: gym.Env) -> dict:
    """The no-op rule alone: every step that changes the observation scores +1."""
    prm = ProcessRewardModel.for_env(env, device="cpu", seed=0)
    with torch.no_grad():  # a constant logit of +1 before the no-op rule
        prm.step_net[-1].weight.zero_()
        prm.step_net[-1].bias.fill_(1.0)
    metrics = _round(evaluate_prm(prm, test, warn=False))
    return {"objective": "no-op rule only", "seed": 0, "seconds": 0.0, "before": metrics, "after": metrics}


def describe(row: dict) -> str:
    b, a = row["before"], row["after"]
    return (
        f"{row['objective']:>22} seed {row['seed']}: balanced {b['balanced_accuracy']:.3f} -> "
        f"{a['balanced_accuracy']:.3f}  AUC {b['auc']:.3f} -> {a['auc']:.3f}  outcome acc "
        f"{a['outcome_accuracy']:.3f}  mu {a['mu']:.2f}  +1 share {a['vote_plus_share']:.2f}"
        f"  ({row['seconds']} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--difficulty", type=float, default=0.3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--objectives", nargs="+", default=list(OBJECTIVES))
    parser.add_argument("--no-noop-rule", action="store_true", help="PRMs without the no-op rule")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    env = gym.make("RLA-TextNav-v0")
    noop_logit = None if args.no_noop_rule else -4.0
    rows = []
    for seed in args.seeds:
        offset = 100_000 * seed
        train = collect_mixture_trajectories(
            ENV, args.difficulty, tasks=args.tasks, seed=seed, task_seed_offset=offset
        )
        test = collect_mixture_trajectories(
            ENV, args.difficulty, tasks=150, seed=seed + 1000, task_seed_offset=10_000_000 + offset
        )
        seed_rows = [] if args.no_noop_rule else [rule_only(test, env) | {"seed": seed}]
        seed_rows += [run(o, train, test, seed, args.epochs, env, noop_logit) for o in args.objectives]
        for row in seed_rows:
            print(describe(row), flush=True)
        rows += seed_rows
    meta = {
        "command": "python benchmarks/prm_objectives.py" + (" --no-noop-rule" if args.no_noop_rule else ""),
        "difficulty": args.difficulty,
        "tasks": args.tasks,
        "epochs": args.epochs,
        "noop_rule": not args.no_noop_rule,
        "date": time.strftime("%Y-%m-%d"),
    }
    name = "prm_objectives_no_rule.json" if args.no_noop_rule else "prm_objectives.json"
    out = args.out or Path("benchmarks/results") / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
