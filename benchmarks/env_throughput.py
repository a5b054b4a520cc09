"""Steps/s of every registered rla-gym env side by side with MiniGrid and BabyAI, in one run.

    python benchmarks/env_throughput.py [--steps 20000] [--rounds 3] [--out FILE.json]

Every env is built with ``gym.make`` (its default wrappers) and driven by uniformly random
actions with resets included; RLA envs pick among admissible commands (read from
``info["action_mask"]``, so the benchmark pays for that too) and return their full info,
oracle fields included. Rounds interleave the envs so machine noise hits all of them alike;
the table reports medians and the ratio to MiniGrid-Empty-8x8-v0. A second table gives the
``rgb_array`` frames/s of each rla-gym env (one render per step of a random episode).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import platform
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import rla_gym

ANCHOR = "MiniGrid-Empty-8x8-v0"


def cases() -> list[tuple[str, str, dict]]:
    """(label, env id, kwargs) of every measured configuration."""
    rla = [
        (f"{env_id} d={d}", env_id, {"difficulty": d}) for env_id in rla_gym.ENV_IDS for d in (0.0, 0.5, 1.0)
    ]
    return [*rla, (ANCHOR, ANCHOR, {}), ("BabyAI-GoToLocal-v0", "BabyAI-GoToLocal-v0", {})]


def frames_per_second(env_id: str, frames: int, seed: int) -> tuple[float, tuple[int, ...]]:
    """rgb_array renders per second at d = 0.5 (a random episode advances between frames)."""
    env = gym.make(env_id, difficulty=0.5, render_mode="rgb_array")
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    shape: tuple[int, ...] = ()
    elapsed = 0.0
    for _ in range(frames):
        start = time.perf_counter()
        shape = env.render().shape
        elapsed += time.perf_counter() - start
        obs, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        if terminated or truncated:
            obs, info = env.reset()
    return frames / elapsed, shape


def steps_per_second(env: gym.Env, steps: int, seed: int) -> float:
    uniform = np.random.default_rng(seed).random(steps)
    masked = isinstance(env.unwrapped, rla_gym.RLAEnv)
    n = int(env.action_space.n)
    obs, info = env.reset(seed=seed)
    start = time.perf_counter()
    for u in uniform:
        if masked:
            admissible = np.flatnonzero(info["action_mask"])
            action = int(admissible[int(u * len(admissible))])
        else:
            action = int(u * n)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset()
    return steps / (time.perf_counter() - start)


def reset_ms(env: gym.Env, resets: int, seed: int) -> float:
    env.reset(seed=seed)
    start = time.perf_counter()
    for _ in range(resets):
        env.reset()
    return 1000 * (time.perf_counter() - start) / resets


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--resets", type=int, default=2_000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/env_throughput.json"))
    args = parser.parse_args()
    try:
        import minigrid  # noqa: F401  (registers the MiniGrid and BabyAI ids)
    except ImportError as error:
        raise SystemExit("the comparison needs minigrid: pip install -e '.[dev]'") from error

    envs = {label: gym.make(env_id, **kwargs) for label, env_id, kwargs in cases()}
    speed: dict[str, list[float]] = {label: [] for label in envs}
    with contextlib.redirect_stdout(io.StringIO()):  # BabyAI prints on rejected samples
        for round_ in range(args.rounds):
            for label, env in envs.items():
                speed[label].append(steps_per_second(env, args.steps, seed=round_))
        resets = {label: reset_ms(env, args.resets, seed=0) for label, env in envs.items()}
    anchor = statistics.median(speed[ANCHOR])
    rows = [
        {
            "env": label,
            "steps_per_s_median": round(statistics.median(runs)),
            "runs": [round(r) for r in runs],
            "ratio_to_minigrid_empty": round(statistics.median(runs) / anchor, 2),
            "reset_ms": round(resets[label], 3),
        }
        for label, runs in speed.items()
    ]
    print(f"| env | steps/s (median of {args.rounds}) | runs | x {ANCHOR} | reset ms |")
    print("|---|---:|---|---:|---:|")
    for r in rows:
        runs = " / ".join(f"{v / 1000:.1f}k" for v in r["runs"])
        print(
            f"| {r['env']} | {r['steps_per_s_median']:,} | {runs} "
            f"| {r['ratio_to_minigrid_empty']:.2f} | {r['reset_ms']:.3f} |"
        )
    render = []
    for env_id in rla_gym.ENV_IDS:
        fps, shape = frames_per_second(env_id, 2_000, seed=0)
        render.append({"env": env_id, "frames_per_s": round(fps), "frame_shape": list(shape)})
    print("\n| env | rgb_array frames/s (d=0.5) | frame shape |\n|---|---:|---|")
    for r in render:
        print(f"| {r['env']} | {r['frames_per_s']:,} | {tuple(r['frame_shape'])} |")
    meta = {
        "command": "python benchmarks/env_throughput.py",
        "steps": args.steps,
        "rounds": args.rounds,
        "python": platform.python_version(),
        "gymnasium": gym.__version__,
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows, "render": render}, indent=2) + "\n")


if __name__ == "__main__":
    main()
