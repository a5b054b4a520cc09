"""How the process signal reaches the learner, and how its quality matters, on TextNav.

    python benchmarks/process_signal.py forms [--seeds 0 1] [--steps 30000]
    python benchmarks/process_signal.py mu [--seeds 0 1] [--steps 30000]
    python benchmarks/process_signal.py lam [--seeds 0 1] [--steps 30000]
    python benchmarks/process_signal.py lam-grpo [--seeds 0 1] [--steps 30000]
    python benchmarks/process_signal.py trainers [--seeds 0 1] [--steps 30000] [--difficulty 0]
    python benchmarks/process_signal.py shaping [--seeds 0 1] [--steps 30000]
    python benchmarks/process_signal.py report benchmarks/results/process_signal_forms_d0.25.json

``forms``: Outcome-only against the three process forms (``--process-scale step``,
``episode``, ``advantage``), each with the method's PRM trained from outcomes (mode
``reward``) and with exact votes (mode ``oracle``). ``mu``: mode ``noisy-oracle`` (votes of
quality mu = p+ + p-) with the paper's group trainer (``--algo grpo``), for mu in
{1, 1.25, 1.5, 2} and m in {1, 3, 9}: Theorem 1 says the vote aggregate separates good from
bad steps as m grows iff mu > 1. ``lam``: lambda in {0.1, 0.3, 1} for the process rows
(``lam-grpo``: the same for the group trainer with the method's PRM).
``trainers``: PPO against the group trainer, Outcome-only, and the group trainer with the
method's PRM and with oracle votes. ``shaping``: potential-based shaping from the exact
distance (mode ``oracle-potential``), the unfarmable ceiling, with PPO and with the group
trainer. Every run: RLA-TextNav-v0 at a fixed difficulty (PPO unless the arm says otherwise),
held-out success of the stochastic policy (primary) and the greedy one, every
``--eval-every`` steps on the same held-out tasks. Runs go two at a time; results land in
``benchmarks/results/process_signal_<study>_d<difficulty>.json`` and
``docs/img/loop/process_<study>_d<difficulty>.png``.
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
STUDIES = ("forms", "mu", "lam", "lam-grpo", "trainers", "shaping")
MUS = (1.0, 1.25, 1.5, 2.0)


def configs(study: str) -> list[dict[str, Any]]:
    """Loop settings (beyond the shared ones) of each arm of ``study``."""
    if study == "forms":
        arms: list[dict[str, Any]] = [{"mode": "outcome"}]
        for mode in ("reward", "oracle"):
            arms += [{"mode": mode, "process_scale": s} for s in ("step", "episode", "advantage")]
        return arms
    if study == "mu":
        arms = [{"algo": "grpo", "mode": "outcome"}]
        for m in (1, 3, 9):
            arms += [{"algo": "grpo", "mode": "noisy-oracle", "mu": mu, "m": m} for mu in MUS]
        return arms
    if study == "lam-grpo":  # lambda for the group trainer with the method's PRM
        return [{"algo": "grpo", "mode": "reward", "lam": lam} for lam in (0.1, 0.3, 1.0)]
    if study == "trainers":
        return [
            {"mode": "outcome"}, {"algo": "grpo", "mode": "outcome"}, {"algo": "grpo", "mode": "reward"},
            {"algo": "grpo", "mode": "oracle"},
        ]  # fmt: skip
    if study == "lam":
        arms = [{"mode": "outcome"}]
        for mode, scale in (("reward", "advantage"), ("reward", "episode"), ("oracle", "advantage")):
            arms += [{"mode": mode, "process_scale": scale, "lam": lam} for lam in (0.1, 0.3, 1.0)]
        return arms
    if study == "shaping":  # the unfarmable ceiling: potential-based shaping from the exact distance
        return [{"mode": "oracle-potential"}, {"algo": "grpo", "mode": "oracle-potential"}]
    raise ValueError(f"study must be one of {STUDIES}, got {study!r}")


def run(job: tuple[dict[str, Any], int, int, int, float, int]) -> dict[str, Any]:
    arm, seed, steps, eval_every, difficulty, episodes = job
    import torch
    from stable_baselines3.common.callbacks import BaseCallback, CallbackList

    from agents.loop import LoopSettings, build_loop
    from agents.train import TrainSettings, evaluate_policy

    torch.set_num_threads(1)
    settings = LoopSettings(env=ENV, difficulty=difficulty, seed=seed, device="cpu", **{"algo": "ppo", **arm})
    model, loop = build_loop(settings)
    evaluation = TrainSettings(**dataclasses.asdict(settings), eval_episodes=episodes)
    curve: list[dict[str, float]] = []

    def evaluate_now() -> None:
        row = {"step": int(model.num_timesteps)}
        for name, greedy in (("stochastic", False), ("greedy", True)):
            (result,) = evaluate_policy(model, evaluation, (difficulty,), deterministic=greedy)
            row[name] = result["success"]
        curve.append(row)

    class Periodic(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:  # after the previous rollout's update
            if self.model.num_timesteps >= eval_every * len(curve):
                evaluate_now()

    start = time.perf_counter()
    model.learn(steps, callback=CallbackList([loop, Periodic()]))
    evaluate_now()
    training = [row["loop/success"] for row in loop.history]
    return {
        "arm": arm, "seed": seed, "curve": curve, "training_success_last_5": sum(training[-5:]) / 5,
        "seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip


def label(arm: dict[str, Any]) -> str:
    algo = arm.get("algo", "ppo")
    if arm["mode"] == "outcome":
        return f"{algo} outcome-only"
    parts = [algo, arm["mode"]] + ([] if algo == "grpo" else [arm.get("process_scale", "step")])
    parts += [f"{key}={arm[key]}" for key in ("mu", "m", "lam") if key in arm]
    return " ".join(parts)


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: per arm, final held-out success (stochastic, then greedy) and the area under
    the stochastic learning curve (mean over evaluations), mean and per seed."""
    import numpy as np

    lines = [
        "| arm | stochastic, final (per seed) | greedy, final | stochastic, mean over the curve |",
        "|---|---|---|---|",
    ]
    for name in dict.fromkeys(label(r["arm"]) for r in results):
        runs = [r for r in results if label(r["arm"]) == name]
        final = [r["curve"][-1]["stochastic"] for r in runs]
        greedy = [r["curve"][-1]["greedy"] for r in runs]
        area = [np.mean([row["stochastic"] for row in r["curve"]]) for r in runs]
        seeds = " / ".join(f"{v:.2f}" for v in final)
        lines.append(
            f"| {name} | **{np.mean(final):.2f}** ({seeds}) | {np.mean(greedy):.2f} | {np.mean(area):.2f} |"
        )
    return "\n".join(lines)


def plot(study: str, results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    if study == "mu":
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for m in (1, 3, 9):
            mus = MUS
            finals = [
                np.mean(
                    [
                        r["curve"][-1]["stochastic"]
                        for r in results
                        if r["arm"].get("mu") == mu and r["arm"].get("m") == m
                    ]
                )
                for mu in mus
            ]
            ax.plot(mus, finals, marker="o", label=f"m = {m}")
        base = np.mean([r["curve"][-1]["stochastic"] for r in results if r["arm"]["mode"] == "outcome"])
        ax.axhline(base, color="grey", linestyle="--", label="outcome-only")
        ax.set(
            xlabel="vote quality mu = p+ + p-",
            ylabel="held-out success (stochastic)",
            title=f"{ENV}: noisy-oracle votes",
        )
        ax.legend()
    else:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name in dict.fromkeys(label(r["arm"]) for r in results):
            runs = [r for r in results if label(r["arm"]) == name]
            steps = [row["step"] for row in runs[0]["curve"]]
            mean = np.mean([[row["stochastic"] for row in r["curve"]] for r in runs], axis=0)
            ax.plot(steps, mean, label=name)
        ax.set(xlabel="env steps", ylabel="held-out success (stochastic)", title=f"{ENV}: {study}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    if sys.argv[1:2] == ["report"]:  # python benchmarks/process_signal.py report RESULTS.json
        print(table(json.loads(Path(sys.argv[2]).read_text())["runs"]))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("study", choices=STUDIES)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--steps", type=int, default=30_000)
    parser.add_argument("--eval-every", type=int, default=6_000)
    parser.add_argument("--difficulty", type=float, default=0.25)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    jobs = [
        (arm, seed, args.steps, args.eval_every, args.difficulty, args.eval_episodes)
        for seed in args.seeds for arm in configs(args.study)
    ]  # fmt: skip
    start = time.perf_counter()
    with Pool(args.workers) as pool:
        results = []
        for result in pool.imap(run, jobs):
            results.append(result)
            print(
                label(result["arm"]), result["seed"], result["curve"][-1], result["seconds"], "s", flush=True
            )
    out = ROOT / "benchmarks" / "results" / f"process_signal_{args.study}_d{args.difficulty}.json"
    payload = {
        "command": " ".join(sys.argv).replace(sys.argv[0], "python benchmarks/process_signal.py"),
        "env": ENV, "wall_seconds": round(time.perf_counter() - start), "runs": results,
    }  # fmt: skip
    out.write_text(json.dumps(payload, indent=1) + "\n")
    print(table(results))
    plot(args.study, results, ROOT / "docs" / "img" / "loop" / f"process_{args.study}_d{args.difficulty}.png")


if __name__ == "__main__":
    main()
