"""Steps/s of the batched vector env against Gymnasium's SyncVectorEnv, per family and num_envs.

    python benchmarks/vector_throughput.py [--num-envs 1 16 256 1024 4096] [--seconds 2] [--out FILE.json]

Each configuration steps random actions drawn among each sub-env's admissible commands (the
mask is read from the batched info, vectorised, so both envs pay the same), resets included,
at difficulty 0.25, with the full info (oracle fields included) unless a row says
``oracle_info=False``. ``batched`` is ``gym.make_vec``'s default: the array-state env where
the family has one (``array_state``; from 64 sub-envs on), whose ``lean_loop`` column is the
same family through the lean loop over bare envs (``array_state=False``). Timing runs for
about ``--seconds`` per configuration; ``mib_*`` is the memory a fresh env holds after its
reset and 20 steps (``tracemalloc``, on a separate instance). MiniGrid-Empty-8x8-v0 (a single
env, ``gym.make``) is the anchor, measured in the same run. SyncVectorEnv is skipped above
1024 envs (it would take minutes to build).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import time
import tracemalloc
from pathlib import Path
from typing import Any

import gymnasium as gym
import minigrid  # noqa: F401  (registers the anchor)
import numpy as np
from gymnasium.envs.registration import load_env_creator

import rla_gym
from rla_gym.vector import ARRAY_STATE_MIN_ENVS, ARRAY_VECTOR_ENVS

ROOT = Path(__file__).resolve().parent.parent


def admissible(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One admissible command per row of ``masks``, uniformly, vectorised."""
    scores = rng.random(masks.shape) * masks
    return scores.argmax(axis=1)


def measure(make: Any, seconds: float, seed: int = 0) -> tuple[float, float]:
    """Steps/s of a fresh env, and the MiB it holds after reset and 20 steps (``tracemalloc``,
    measured on a second instance so the timing runs untraced)."""
    gc.collect()
    tracemalloc.start()
    probe = make()
    _, info = probe.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(20):
        _, _, _, _, info = probe.step(admissible(info["action_mask"], rng))
    held = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    probe.close()
    del probe
    gc.collect()
    envs = make()
    _, info = envs.reset(seed=seed)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            _, _, _, _, info = envs.step(admissible(info["action_mask"], rng))
        steps += 10 * envs.num_envs
    rate = steps / (time.perf_counter() - start)
    envs.close()
    return rate, held


def anchor(seconds: float) -> float:
    env = gym.make("MiniGrid-Empty-8x8-v0")
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(int(rng.integers(3)))
        steps += 1
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def _maker(env_id: str, n: int, **kwargs: Any) -> Any:
    return lambda: gym.make_vec(env_id, num_envs=n, difficulty=0.25, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 16, 256, 1024, 4096])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "vector_throughput.json"))
    args = parser.parse_args()
    rows = []
    reference = anchor(args.seconds)
    print(f"MiniGrid-Empty-8x8-v0 single env: {reference:,.0f} steps/s")
    for env_id in rla_gym.ENV_IDS:
        for n in args.num_envs:
            batched, batched_mem = measure(_maker(env_id, n), args.seconds)
            lean, lean_mem = measure(_maker(env_id, n, oracle_info=False), args.seconds)
            env_cls = load_env_creator(rla_gym.ENV_IDS[env_id])
            has_arrays = f"{env_cls.__module__}:{env_cls.__qualname__}" in ARRAY_VECTOR_ENVS
            array_state = has_arrays and n >= ARRAY_STATE_MIN_ENVS
            loop = batched
            if array_state:  # the same family through the lean loop over bare envs
                loop, _ = measure(_maker(env_id, n, array_state=False), args.seconds)
            sync = sync_mem = float("nan")
            if n <= 1024:
                sync, sync_mem = measure(_maker(env_id, n, vectorization_mode="sync"), args.seconds)
            ratio = None if np.isnan(sync) else round(batched / sync, 2)
            row = {
                "env": env_id, "num_envs": n, "array_state": array_state, "batched": round(batched),
                "batched_no_oracle": round(lean), "lean_loop": round(loop),
                "sync": None if np.isnan(sync) else round(sync), "ratio_to_sync": ratio,
                "ratio_to_minigrid": round(batched / reference, 2), "mib_batched": round(batched_mem, 1),
                "mib_sync": None if np.isnan(sync_mem) else round(sync_mem, 1),
            }  # fmt: skip
            rows.append(row)
            print(row, flush=True)
    payload = {
        "command": "python benchmarks/vector_throughput.py " + " ".join(
            f"--num-envs {' '.join(map(str, args.num_envs))} --seconds {args.seconds}".split()
        ),
        "machine": f"{platform.machine()}, Python {platform.python_version()}, 2 shared cores",
        "minigrid_empty_8x8_single_env": round(reference),
        "rows": rows,
    }  # fmt: skip
    Path(args.out).write_text(json.dumps(payload, indent=1) + "\n")
    plot(rows, reference, ROOT / "docs" / "img" / "vector_throughput.png")


def plot(rows: list[dict[str, Any]], reference: float, path: Path) -> None:
    """Steps/s against num_envs per family, batched and SyncVectorEnv (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for k, env_id in enumerate(rla_gym.ENV_IDS):
        mine = [r for r in rows if r["env"] == env_id]
        color = f"C{k}"
        ax.plot(
            [r["num_envs"] for r in mine],
            [r["batched"] for r in mine],
            "o-",
            color=color,
            label=f"{env_id} batched",
        )
        sync = [r for r in mine if r["sync"] is not None]
        ax.plot([r["num_envs"] for r in sync], [r["sync"] for r in sync], "x--", color=color, alpha=0.6,
                label=f"{env_id} SyncVectorEnv")  # fmt: skip
    ax.axhline(reference, color="grey", linestyle=":", label="MiniGrid-Empty-8x8 single env")
    ax.set(xscale="log", yscale="log", xlabel="num_envs", ylabel="env steps/s (random admissible actions)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
