"""Reference agents (exact oracle, random admissible commands) and an episode runner.

These need no learning framework: they read only ``info["action_mask"]`` and
``info["oracle_mask"]`` from the RLAEnv info contract.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from rla_gym.core import HELDOUT_SEED_START, TASK_SEED_LIMIT

#: Chooses a command from (observation, info, rng).
Agent = Callable[[Any, dict[str, Any], np.random.Generator], int]


def random_agent(obs: Any, info: dict[str, Any], rng: np.random.Generator) -> int:
    """A uniformly random admissible command."""
    admissible = np.flatnonzero(info["action_mask"])
    return int(admissible[rng.integers(len(admissible))])


def oracle_agent(obs: Any, info: dict[str, Any], rng: np.random.Generator) -> int:
    """A uniformly random optimal command (exact, from ``info["oracle_mask"]``)."""
    best = np.flatnonzero(info["oracle_mask"])
    return int(best[rng.integers(len(best))])


@dataclass(frozen=True)
class EvaluationResult:
    """Aggregate of one agent over a set of held-out tasks."""

    episodes: int
    success_rate: float
    mean_length: float
    mean_optimal_len: float
    steps_per_second: float


def heldout_seeds(count: int, offset: int = 0) -> list[int]:
    """``count`` task seeds reserved for evaluation (never drawn by an unpinned reset), from the
    ``offset``-th on.

    Examples:
        >>> heldout_seeds(2, offset=1) == [HELDOUT_SEED_START + 1, HELDOUT_SEED_START + 2]
        True
    """
    for name, value in (("count", count), ("offset", offset)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {value!r}")
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value!r}")
    stop = HELDOUT_SEED_START + int(offset) + int(count)
    if stop > TASK_SEED_LIMIT:
        room = TASK_SEED_LIMIT - HELDOUT_SEED_START
        raise ValueError(f"offset + count must be <= {room} held-out seeds, got {offset} + {count}")
    return list(range(HELDOUT_SEED_START + int(offset), stop))


def evaluate(
    env: gym.Env[Any, Any], agent: Agent, difficulty: float, task_seeds: Sequence[int], seed: int = 0
) -> EvaluationResult:
    """Run ``agent`` once on each task (difficulty, task seed) of ``env``; time includes resets.

    The env's own pinned task, or difficulty, is restored afterwards. ``task_seeds`` must name at
    least one task (a success rate over none is undefined).
    """
    task_seeds = list(task_seeds)
    if not task_seeds:
        raise ValueError("task_seeds must name at least one task, got none")
    base: Any = env.unwrapped
    pinned, previous = base.pinned_task, base.difficulty
    rng = np.random.default_rng(seed)
    successes, lengths, optimal = 0, 0, 0
    start = time.perf_counter()
    try:
        for task_seed in task_seeds:
            obs, info = env.reset(options={"task": base.make_task(difficulty, task_seed)})
            optimal += info["optimal_len"]
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(agent(obs, info, rng))
                lengths += 1
                done = terminated or truncated
            successes += bool(info["is_success"])
    finally:
        if pinned is not None:
            base.set_task(pinned)
        else:
            base.set_difficulty(previous)
    elapsed = time.perf_counter() - start
    n = len(task_seeds)
    return EvaluationResult(n, successes / n, lengths / n, optimal / n, lengths / elapsed)
