"""Steps/s cost of the curriculum adapters on RLA-TextNav-v0, each beside its plain counterpart.

    python benchmarks/curriculum_overhead.py [--steps 20000] [--rounds 3]

Single env: random admissible commands, resets included, d = 0.5 (``FixedCurriculum(0.5)``
for the wrapped runs, so both see the same task distribution). Vector envs: 4 sub-envs,
uniformly random actions (masked ones are no-ops), steps counted per sub-env.
``AdaptiveDifficultyWrapper`` runs reading ``info["rm_outcome_prediction"]`` from a stand-in
reward wrapper that predicts outcomes exactly (so difficulty stays at 0.5), and with
``predict_outcome`` (it keeps the trajectory; a huge interval keeps difficulty at 0.5).
Rounds interleave the configurations; medians are reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

import rla_gym  # noqa: F401
from agents.curriculum import CurriculumVecEnv
from rla_gym.curricula import FixedCurriculum
from rla_gym.wrappers import AdaptiveDifficultyWrapper, CurriculumVectorWrapper, CurriculumWrapper

ENV = "RLA-TextNav-v0"
D = 0.5
N = 4


class PerfectPrediction(gym.Wrapper):
    """Stand-in for the reward-model wrapper: predicts the outcome exactly at the last step.

    Errors are then all zero, balance is 1 and the difficulty stays put, so the comparison
    with the plain env runs the same task distribution.
    """

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info["rm_outcome_prediction"] = float(info["outcome"])
        return obs, reward, terminated, truncated, info


def single(env: gym.Env, steps: int, seed: int) -> float:
    uniform = np.random.default_rng(seed).random(steps)
    _, info = env.reset(seed=seed)
    start = time.perf_counter()
    for u in uniform:
        admissible = np.flatnonzero(info["action_mask"])
        _, _, terminated, truncated, info = env.step(int(admissible[int(u * len(admissible))]))
        if terminated or truncated:
            _, info = env.reset()
    return steps / (time.perf_counter() - start)


def gym_vector(envs: Any, steps: int, seed: int) -> float:
    actions = np.random.default_rng(seed).integers(0, 24, (steps // N, N))
    envs.reset(seed=seed)
    start = time.perf_counter()
    for a in actions:
        envs.step(a)
    return len(actions) * N / (time.perf_counter() - start)


def sb3_vector(venv: Any, steps: int, seed: int) -> float:
    actions = np.random.default_rng(seed).integers(0, 24, (steps // N, N))
    venv.reset()
    start = time.perf_counter()
    for a in actions:
        venv.step(a)
    return len(actions) * N / (time.perf_counter() - start)


def gym_vec(mode: str, autoreset: AutoresetMode, curriculum: bool) -> Any:
    envs = gym.make_vec(
        ENV, N, vectorization_mode=mode, vector_kwargs={"autoreset_mode": autoreset}, difficulty=D
    )
    return CurriculumVectorWrapper(envs, FixedCurriculum(ENV, D)) if curriculum else envs


def sb3_vec(cls: type, curriculum: bool) -> Any:
    venv = make_vec_env(f"rla_gym:{ENV}", n_envs=N, seed=0, vec_env_cls=cls, env_kwargs={"difficulty": D})
    return CurriculumVecEnv(venv, FixedCurriculum(ENV, D)) if curriculum else venv


def adaptive(predict_in_info: bool) -> gym.Env:
    if predict_in_info:
        return AdaptiveDifficultyWrapper(PerfectPrediction(gym.make(ENV)), start=D)
    return AdaptiveDifficultyWrapper(gym.make(ENV), start=D, interval=10**9, predict_outcome=lambda t: 0.0)


Case = tuple[Callable[[], Any], Callable[[Any, int, int], float], "str | None"]


def cases() -> dict[str, Case]:
    """label -> (factory, runner, baseline label)."""
    plain = "TextNav (plain gym.make)"
    table: dict[str, Case] = {
        plain: (lambda: gym.make(ENV, difficulty=D), single, None),
        "CurriculumWrapper(FixedCurriculum)": (
            lambda: CurriculumWrapper(gym.make(ENV), FixedCurriculum(ENV, D)),
            single,
            plain,
        ),
        "AdaptiveDifficultyWrapper (info prediction)": (lambda: adaptive(True), single, plain),
        "AdaptiveDifficultyWrapper (predict_outcome)": (lambda: adaptive(False), single, plain),
    }
    for mode in ("sync", "async"):
        for autoreset in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            base = f"{mode.capitalize()}VectorEnv x{N} {autoreset.name}"
            table[base] = (lambda m=mode, a=autoreset: gym_vec(m, a, False), gym_vector, None)
            wrapped = (lambda m=mode, a=autoreset: gym_vec(m, a, True), gym_vector, base)
            table[f"{base} + CurriculumVectorWrapper"] = wrapped
    for cls in (DummyVecEnv, SubprocVecEnv):
        base = f"{cls.__name__} x{N}"
        table[base] = (lambda c=cls: sb3_vec(c, False), sb3_vector, None)
        table[f"{base} + CurriculumVecEnv"] = (lambda c=cls: sb3_vec(c, True), sb3_vector, base)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/curriculum_overhead.json"))
    args = parser.parse_args()
    table = cases()
    envs = {label: factory() for label, (factory, _, _) in table.items()}
    speed: dict[str, list[float]] = {label: [] for label in table}
    try:
        for round_ in range(args.rounds):
            for label, (_, run, _) in table.items():
                speed[label].append(run(envs[label], args.steps, round_))
    finally:
        for env in envs.values():
            env.close()
    rows = []
    print("| configuration | steps/s (median) | runs | overhead vs plain |")
    print("|---|---:|---|---:|")
    for label, (_, _, baseline) in table.items():
        median = statistics.median(speed[label])
        overhead = None if baseline is None else 1 - median / statistics.median(speed[baseline])
        rows.append(
            {
                "configuration": label,
                "steps_per_s": round(median),
                "runs": [round(r) for r in speed[label]],
                "overhead": None if overhead is None else round(overhead, 3),
            }
        )
        runs = " / ".join(f"{r / 1000:.1f}k" for r in speed[label])
        print(f"| {label} | {median:,.0f} | {runs} | {'-' if overhead is None else f'{overhead:+.1%}'} |")
    meta = {
        "command": "python benchmarks/curriculum_overhead.py",
        "steps": args.steps,
        "rounds": args.rounds,
        "date": time.strftime("%Y-%m-%d"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
