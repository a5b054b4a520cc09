"""Trajectories of token observations, and a mixture-policy collector for reward-model data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from rla_gym.core import RLAEnv


@dataclass(frozen=True)
class Trajectory:
    """One episode as the reward model sees it.

    ``obs[t]`` and ``next_obs[t]`` are the token observations around ``actions[t]``;
    ``outcome`` is +1 / -1; ``labels[t]`` is the env's exact ``progress`` label mapped to
    +1 (the step was optimal) / -1 (it was not), for evaluation only, never for training.
    """

    obs: np.ndarray
    actions: np.ndarray
    next_obs: np.ndarray
    outcome: int
    task_id: str
    labels: np.ndarray | None = None
    difficulty: float | None = None

    def __len__(self) -> int:
        return len(self.actions)


def collect_mixture_trajectories(
    env_id: str,
    difficulty: float,
    *,
    tasks: int,
    rollouts_per_task: int = 8,
    seed: int = 0,
    task_seed_offset: int = 0,
) -> list[Trajectory]:
    """Episodes of a policy that follows the exact oracle with probability p ~ U[0, 1] per episode.

    Each of ``tasks`` tasks (task seeds ``task_seed_offset + k``) is played
    ``rollouts_per_task`` times, so per-task success rates exist (the paper's RM data filter
    needs them). Other actions are uniformly random admissible commands.
    """
    env = gym.make(env_id, obs_mode="dict")
    base = env.unwrapped
    if not isinstance(base, RLAEnv):
        raise ValueError(f"{env_id!r} is not an rla-gym environment")
    rng = np.random.default_rng(seed)
    out = []
    for k in range(tasks):
        task = base.make_task(difficulty, task_seed_offset + k)
        for _ in range(rollouts_per_task):
            p = rng.random()
            obs, info = env.reset(options={"task": task})
            before, actions, after, labels = [], [], [], []
            done = False
            while not done:
                if rng.random() < p:
                    action = int(rng.choice(np.flatnonzero(info["oracle_mask"])))
                else:
                    action = int(rng.choice(np.flatnonzero(info["action_mask"])))
                before.append(obs["tokens"])
                obs, _, terminated, truncated, info = env.step(action)
                actions.append(action)
                after.append(obs["tokens"])
                labels.append(1 if info["progress"] == 1 else -1)
                done = terminated or truncated
            out.append(
                Trajectory(
                    np.stack(before), np.array(actions), np.stack(after), int(info["outcome"]), task.task_id,
                    np.array(labels), task.difficulty,
                )
            )  # fmt: skip
    return out


def success_groups(trajectories: Sequence[Trajectory]) -> list[str]:
    """The group whose success rate the paper's [0.2, 0.8] filter reads, per trajectory.

    A task with several rollouts in the batch is its own group (the paper). Curricula that draw
    a fresh task every episode never repeat one, and a task seen once has a success rate of 0
    or 1, so such tasks are grouped by their difficulty instead.
    """
    counts: dict[str, int] = {}
    for t in trajectories:
        counts[t.task_id] = counts.get(t.task_id, 0) + 1
    return [
        t.task_id
        if counts[t.task_id] >= 2 or t.difficulty is None
        else f"difficulty={round(t.difficulty, 2)}"
        for t in trajectories
    ]


def task_success_rates(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Success rate of each group (see :func:`success_groups`) over the given trajectories."""
    wins: dict[str, list[int]] = {}
    for key, t in zip(success_groups(trajectories), trajectories, strict=True):
        wins.setdefault(key, []).append(t.outcome == 1)
    return {key: float(np.mean(w)) for key, w in wins.items()}
