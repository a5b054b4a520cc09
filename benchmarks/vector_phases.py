"""Where a batched vector env's step goes: generating new worlds, reading them in, the arrays.

    python benchmarks/vector_phases.py [--num-envs 1024 4096] [--seconds 3] [--out FILE.json]

Steps each family's array-state env (``gym.make_vec``'s default from 64 sub-envs on, asked for
here at any size) with random admissible actions at difficulty 0.25, as
``vector_throughput.py`` does, and times three parts of every step: **generation** (each
starting sub-env's bare env choosing its task and generating its world with the single env's
code, ``_start_task``), **reading in** (the new worlds into the arrays: ``_load_task``,
``_load``, ``_after_load``) and **the rest** (the dynamics, masks, tokens, oracle and infos, a
fixed number of numpy calls over all sub-envs). ``ceiling_*`` is the steps/s the env would
reach if a part cost nothing: the bound each part sets. Timers wrap the methods, so the rates
run a little below ``vector_throughput.py``'s.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from vector_throughput import admissible  # a sibling: a script runs with its folder on sys.path

import rla_gym

ROOT = Path(__file__).resolve().parent.parent
READING_IN = ("_load_task", "_load", "_after_load")


@contextmanager
def timed(
    owner: type, names: tuple[str, ...], totals: dict[str, float], calls: dict[str, int]
) -> Iterator[None]:
    """Add the seconds spent in ``owner``'s methods ``names`` to ``totals[name]`` and count the
    calls in ``calls[name]`` while inside."""

    def wrap(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed_method(self: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                totals[name] += time.perf_counter() - start
                calls[name] += 1

        return timed_method

    saved = {name: owner.__dict__.get(name) for name in names}
    for name in names:
        totals.setdefault(name, 0.0)
        calls.setdefault(name, 0)
        setattr(owner, name, wrap(name, getattr(owner, name)))
    try:
        yield
    finally:
        for name, method in saved.items():
            if method is None:
                delattr(owner, name)
            else:
                setattr(owner, name, method)


def phases(
    env_id: str, num_envs: int, seconds: float, seed: int = 0, difficulty: float = 0.25
) -> dict[str, Any]:
    """Steps/s of ``env_id``'s batched env at ``num_envs`` and the ms per step of each part."""
    envs = gym.make_vec(env_id, num_envs=num_envs, difficulty=difficulty, array_state=True)
    vector = envs.unwrapped
    bare = type(vector.envs[0])
    rng = np.random.default_rng(seed)
    _, info = envs.reset(seed=seed)
    _, _, _, _, info = envs.step(admissible(info["action_mask"], rng))
    totals: dict[str, float] = {}
    calls: dict[str, int] = {}
    steps = worlds = 0
    finished = int(np.count_nonzero(info["outcome"]))  # these start a world on the next step
    with timed(bare, ("_start_task",), totals, calls), timed(type(vector), READING_IN, totals, calls):
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            _, _, _, _, info = envs.step(admissible(info["action_mask"], rng))
            worlds += finished
            finished = int(np.count_nonzero(info["outcome"]))
            steps += 1
        wall = time.perf_counter() - start
    envs.close()
    per_step = {name: total / steps * 1e3 for name, total in totals.items()}
    total_ms = wall / steps * 1e3
    generation = per_step["_start_task"]
    reading = sum(per_step[name] for name in READING_IN)
    rest = total_ms - generation - reading
    return {
        "env": env_id, "num_envs": num_envs, "env_class": type(vector).__name__, "steps": steps,
        "steps_per_s": round(steps * num_envs / wall), "ms_per_step": round(total_ms, 3),
        "worlds": worlds, "generated": calls["_start_task"],
        "worlds_per_step": round(worlds / steps, 1), "generation_ms": round(generation, 3),
        "reading_in_ms": round(reading, 3), "rest_ms": round(rest, 3),
        "generation_us_per_world": round(generation * 1e3 * steps / worlds, 1) if worlds else None,
        "ceiling_without_generation": round(num_envs / (total_ms - generation) * 1e3),
        "ceiling_arrays_only": round(num_envs / rest * 1e3),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "vector_phases.json"))
    args = parser.parse_args()
    rows = []
    for env_id in rla_gym.ENV_IDS:
        for n in args.num_envs:
            row = phases(env_id, n, args.seconds)
            rows.append(row)
            print(row, flush=True)
    payload = {
        "command": f"python benchmarks/vector_phases.py --num-envs {' '.join(map(str, args.num_envs))} "
        f"--seconds {args.seconds}",
        "machine": f"{platform.machine()}, Python {platform.python_version()}, 2 shared cores",
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
