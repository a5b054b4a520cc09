"""The study's gate: Outcome-only learning curves per env, to size the study's budget.

    python benchmarks/gate_curves.py [--steps 1000000] [--every 100000] [--levels 0.25 0.5]
        [--envs RLA-TextNav-v0 ...] [--seeds 0] [--workers 2] [--set key=value ...]

Each (env, level, seed) trains Outcome-only (mode ``outcome``) at that fixed difficulty on
the fast path (``--preset fast``: PPO on 128 batched envs), one process per run, one torch
thread. Every ``--every`` env steps it evaluates the stochastic policy (the primary figure)
and the greedy one on 200 held-out tasks at the training level (the same tasks in every
run), batched. ``--set`` overrides any LoopSettings field (``--set history=4``).

The budget question: a curve has *plateaued* at the first evaluation from which it never
gains more than 0.05 in held-out stochastic success again. Results:
``benchmarks/results/gate_curves.json`` (and ``gate_curves.png`` with matplotlib).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GAIN = 0.05  # a curve that never gains more than this again has plateaued


def _value(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Train one (env, level, seed) and evaluate it every ``every`` steps."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    from agents.evaluation import evaluate_batched, loop_batch_agent
    from agents.loop import LoopSettings, apply_preset, build_loop

    torch.set_num_threads(1)
    settings = apply_preset(LoopSettings(
        env=job["env"], mode="outcome", difficulty=job["level"], max_difficulty=job["level"],
        seed=job["seed"], device="cpu", **{"preset": "fast", **job["overrides"]},
    ), given=set(job["overrides"]))  # fmt: skip
    model, loop = build_loop(settings)
    curve: list[dict[str, Any]] = []
    start = time.perf_counter()
    training = [0.0]

    def evaluate() -> None:
        point: dict[str, Any] = {"step": int(model.num_timesteps), "train_seconds": round(training[0], 1)}
        for key, deterministic in (("stochastic", False), ("greedy", True)):
            rows = evaluate_batched(
                job["env"], loop_batch_agent(model, settings, deterministic), (job["level"],), 200
            )
            point[key] = rows[0]["success"]
        curve.append(point)
        print(job["env"], job["level"], job["seed"], point, flush=True)

    class Every(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            training[0] = time.perf_counter() - start - sum(p.get("eval_seconds", 0) for p in curve)
            if self.model.num_timesteps >= job["every"] * len(curve):
                began = time.perf_counter()
                evaluate()
                curve[-1]["eval_seconds"] = time.perf_counter() - began

    model.learn(job["steps"], callback=[loop, Every()])
    training[0] = time.perf_counter() - start - sum(p.get("eval_seconds", 0) for p in curve)
    evaluate()
    return {**{k: job[k] for k in ("env", "level", "seed")}, "curve": curve, "plateau_step": plateau(curve),
            "steps_per_second": round(model.num_timesteps / training[0])}  # fmt: skip


def plateau(curve: list[dict[str, Any]]) -> int | None:
    """The first evaluation step from which stochastic success never gains more than GAIN again
    over at least two later evaluations (None: still rising, or too few evaluations to tell).

    Examples:
        >>> points = [{"step": k, "stochastic": v} for k, v in enumerate([0.1, 0.5, 0.52, 0.53, 0.7])]
        >>> plateau(points), plateau(points[:4])
        (None, 1)
    """
    values = [point["stochastic"] for point in curve]
    for i, value in enumerate(values[:-2]):
        if max(values[i + 1 :]) <= value + GAIN:
            return int(curve[i]["step"])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--every", type=int, default=100_000)
    parser.add_argument("--levels", type=float, nargs="+", default=[0.25, 0.5])
    parser.add_argument(
        "--envs", nargs="+", default=["RLA-TextNav-v0", "RLA-Household-v0", "RLA-GUI-v0", "RLA-Reason-v0"]
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gate_curves.json")
    args = parser.parse_args()
    overrides = {k: _value(v) for k, v in (item.split("=", 1) for item in args.set)}
    jobs = [
        {
            "env": env,
            "level": level,
            "seed": seed,
            "steps": args.steps,
            "every": args.every,
            "overrides": overrides,
        }
        for seed in args.seeds
        for env in args.envs
        for level in args.levels
    ]
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        results = pool.map(run, jobs, chunksize=1)
    import torch

    payload = {
        "command": "python benchmarks/gate_curves.py "
        + " ".join(f"--{k} {v}" for k, v in (("steps", args.steps), ("every", args.every)))
        + f" --levels {' '.join(map(str, args.levels))} --envs {' '.join(args.envs)}"
        + f" --seeds {' '.join(map(str, args.seeds))} --workers {args.workers}"
        + (f" --set {' '.join(args.set)}" if args.set else ""),
        "machine": f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
        f"2 shared cores, {args.workers} runs at a time, 1 torch thread each",
        "date": time.strftime("%Y-%m-%d"),
        "wall_seconds": round(time.perf_counter() - start),
        "settings": {"preset": "fast", "mode": "outcome", **overrides},
        "runs": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    print("| env | level | seed | plateau step | final stochastic | final greedy | steps/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        last = r["curve"][-1]
        flat = "still rising" if r["plateau_step"] is None else r["plateau_step"]
        print(f"| {r['env']} | {r['level']} | {r['seed']} | {flat} | "
              f"{last['stochastic']:.2f} | {last['greedy']:.2f} | {r['steps_per_second']:,} |")  # fmt: skip
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    envs = sorted({r["env"] for r in results})
    fig, axes = plt.subplots(1, len(envs), figsize=(4.5 * len(envs), 3.3), squeeze=False)
    for axis, env in zip(axes[0], envs, strict=True):
        for r in (r for r in results if r["env"] == env):
            steps = [p["step"] for p in r["curve"]]
            axis.plot(steps, [p["stochastic"] for p in r["curve"]], label=f"d={r['level']} s{r['seed']}")
        axis.set(title=env, xlabel="env steps", ylabel="held-out success (stochastic)", ylim=(-0.02, 1.02))
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=100)


if __name__ == "__main__":
    main()
