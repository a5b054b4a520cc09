"""Held-out evaluation in batch, and the metrics of the study's evaluation protocol.

Every (difficulty, held-out task) of a grid runs as one sub-env of the suite's batched vector
env, once, with autoreset off: one policy forward and one vector step per step for all of
them. The tasks are :func:`rla_gym.evaluation.heldout_seeds`, the same for every run, so runs
are paired. Agents: a trained SB3 policy (stochastic, the field's figure, or greedy), and the
two references every score is normalised between, random admissible commands and the exact
oracle.

Metrics of one run (:func:`run_metrics`): success per level, the frontier ``d50`` (the
interpolated hardest level with success of at least 0.5), the area under success against
difficulty, and the area under the learning curve.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rla_gym.core import RLAEnv, check_difficulty
from rla_gym.evaluation import heldout_seeds

#: The study's difficulty grid: 11 levels from 0 to 1.
DENSE_LEVELS: tuple[float, ...] = tuple(round(0.1 * k, 1) for k in range(11))

#: Chooses one command per sub-env from the batch's observations and infos.
BatchAgent = Callable[[Any, dict[str, Any]], np.ndarray]


def policy_batch_agent(model: Any, masked: bool, deterministic: bool) -> BatchAgent:
    """An SB3 model's policy, on a batch: greedy, or stochastic with ``deterministic=False``."""

    def act(obs: Any, info: dict[str, Any]) -> np.ndarray:
        if masked:  # MaskablePPO acts on admissible commands only when it is given the masks
            masks = info["action_mask"] == 1
            return np.asarray(model.predict(obs, deterministic=deterministic, action_masks=masks)[0])
        return np.asarray(model.predict(obs, deterministic=deterministic)[0])

    return act


def loop_batch_agent(model: Any, settings: Any, deterministic: bool) -> BatchAgent:
    """The batch agent of a model built by ``agents.loop.build_loop`` from ``settings``: its policy,
    masked for the maskable algorithms, fed its history when ``settings.history`` > 0."""
    masked = str(settings.algo).startswith("maskable")
    frames = int(getattr(settings, "history", 0) or 0)
    if frames:
        from agents.history import history_batch_agent

        return history_batch_agent(model, frames, masked, deterministic)
    return policy_batch_agent(model, masked, deterministic)


def _choose(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random allowed command per row of ``masks`` (rows with none get 0)."""
    keys = rng.random(masks.shape) * (masks > 0)
    return keys.argmax(axis=1)


def random_batch_agent(seed: int = 0) -> BatchAgent:
    """Uniformly random admissible commands (the lower reference)."""
    rng = np.random.default_rng(seed)
    return lambda obs, info: _choose(info["action_mask"], rng)


def oracle_batch_agent(seed: int = 0) -> BatchAgent:
    """A uniformly random optimal command from the exact oracle (the upper reference)."""
    rng = np.random.default_rng(seed)
    return lambda obs, info: _choose(info["oracle_mask"], rng)


def _base_env(env_id: str) -> RLAEnv:
    from rla_gym.registration import make_rla_env

    env = make_rla_env(env_id)  # an unknown or foreign id is named
    base: RLAEnv = env.unwrapped  # type: ignore[assignment]
    env.close()
    return base


def _vector_env(env_id: str, base: RLAEnv, num_envs: int) -> Any:
    from rla_gym.vector import make_vector_env

    kwargs = gym.spec(env_id).kwargs
    return make_vector_env(type(base), num_envs, **kwargs, autoreset_mode=AutoresetMode.DISABLED)


def evaluate_batched(
    env_id: str,
    agent: BatchAgent,
    levels: Sequence[float] = DENSE_LEVELS,
    tasks: int = 200,
    *,
    chunk: int = 1024,
) -> list[dict[str, float]]:
    """Success and mean length of ``agent`` per level, one episode on each of ``tasks`` held-out
    tasks per level (the same tasks for every agent and run).

    Examples:
        >>> rows = evaluate_batched("RLA-TextNav-v0", oracle_batch_agent(), levels=(0.0, 0.5), tasks=4)
        >>> [(r["difficulty"], r["success"]) for r in rows]
        [(0.0, 1.0), (0.5, 1.0)]
    """
    levels = [check_difficulty(level, "level") for level in levels]
    if not levels:
        raise ValueError("levels must name at least one difficulty, got none")
    if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 1:
        raise ValueError(f"tasks must be an integer >= 1, got {tasks!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be an integer >= 1, got {chunk!r}")
    base = _base_env(env_id)
    grid = [base.make_task(level, seed) for level in levels for seed in heldout_seeds(tasks)]
    success = np.zeros(len(grid))
    length = np.zeros(len(grid))
    envs = _vector_env(env_id, base, min(chunk, len(grid)))
    with _own_random_state():  # a stochastic policy's draws leave the caller's training alone
        _play(envs, agent, grid, success, length)
    rows_out = []
    for k, level in enumerate(levels):
        block = slice(k * tasks, (k + 1) * tasks)
        rows_out.append({
            "difficulty": level, "success": float(success[block].mean()),
            "mean_length": float(length[block].mean()), "episodes": tasks,
        })  # fmt: skip
    return rows_out


def _play(envs: Any, agent: BatchAgent, grid: list[Any], success: np.ndarray, length: np.ndarray) -> None:
    """One episode of ``agent`` on every task of ``grid``, ``envs.num_envs`` at a time."""
    try:
        for start in range(0, len(grid), envs.num_envs):
            part = grid[start : start + envs.num_envs]
            live = np.zeros(envs.num_envs, dtype=bool)
            live[: len(part)] = True
            # sub-envs past the grid's end replay its first task, unread
            envs.unwrapped.set_tasks(part + [part[0]] * (envs.num_envs - len(part)))
            obs, info = envs.reset(seed=0)
            # every row starts an episode here: said outright, since a row that ended on the last
            # step of the chunk before was never shown ending (a history agent must not carry it on)
            info = {**info, "episode_start": np.ones(envs.num_envs, dtype=bool)}
            running = live.copy()
            steps = np.zeros(envs.num_envs, dtype=np.int64)
            while running.any():
                obs, _, terminated, truncated, info = envs.step(agent(obs, info))
                steps += running
                ended = running & (terminated | truncated)
                rows = np.flatnonzero(ended)
                success[start + rows] = info["is_success"][rows]
                length[start + rows] = steps[rows]
                running &= ~ended
    finally:
        envs.close()


@contextlib.contextmanager
def _own_random_state() -> Iterator[None]:
    """Run the block on a copy of torch's (CPU, and current CUDA device's) and numpy's global
    random states, restoring them after: evaluating a stochastic policy during training leaves
    the training's draws as they were."""
    state = np.random.get_state()  # noqa: NPY002
    try:
        import torch
    except ImportError:  # the lean install: no policy to sample
        torch = None  # type: ignore[assignment]
    try:
        if torch is None:
            yield
        else:
            cuda = torch.cuda.is_available() and torch.cuda.is_initialized()
            devices = [torch.cuda.current_device()] if cuda else []
            with torch.random.fork_rng(devices=devices):
                yield
    finally:
        np.random.set_state(state)  # noqa: NPY002


# ---------------------------------------------------------------- metrics
def frontier_d50(levels: Sequence[float], success: Sequence[float]) -> float:
    """The hardest level with success of at least 0.5, interpolated linearly between the last
    level that reaches 0.5 and the next one; 0.0 when no level reaches 0.5.

    Examples:
        >>> round(frontier_d50([0.0, 0.1, 0.2, 0.3], [1.0, 0.8, 0.4, 0.0]), 3)
        0.175
    """
    x, y = _curve(levels, success, "levels")
    reached = np.flatnonzero(y >= 0.5)
    if not len(reached):
        return 0.0
    i = int(reached[-1])
    if i == len(x) - 1:
        return float(x[i])
    return float(x[i] + (y[i] - 0.5) / (y[i] - y[i + 1]) * (x[i + 1] - x[i]))


def area_under(x: Sequence[float], y: Sequence[float], name: str = "x") -> float:
    """Trapezoid area under y(x) divided by the span of x: the curve's mean height in [0, 1].

    Examples:
        >>> area_under([0.0, 0.5, 1.0], [1.0, 0.5, 0.0])
        0.5
    """
    xs, ys = _curve(x, y, name)
    if len(xs) == 1:
        return float(ys[0])
    return float(np.sum((ys[1:] + ys[:-1]) / 2 * np.diff(xs)) / (xs[-1] - xs[0]))


def normalise(score: float, random: float, oracle: float) -> float:
    """(score - random) / (oracle - random): 0 at the random policy, 1 at the oracle; NaN where the
    two references agree (the level cannot tell policies apart)."""
    span = oracle - random
    return float("nan") if span == 0 else float((score - random) / span)


def run_metrics(
    levels: Sequence[float], success: Sequence[float], curve: Sequence[tuple[int, float]] = ()
) -> dict[str, float]:
    """d50, the area under success against difficulty and, given ``curve`` ((step, score) pairs of
    the run's evaluations), the area under the learning curve."""
    metrics = {"d50": frontier_d50(levels, success), "auc_difficulty": area_under(levels, success, "levels")}
    if curve:
        steps, scores = zip(*curve, strict=True)
        metrics["auc_learning"] = area_under(steps, scores, "steps")
    return metrics


def _curve(x: Sequence[float], y: Sequence[float], name: str) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xs.ndim != 1 or xs.shape != ys.shape or not len(xs):
        raise ValueError(
            f"{name} and the scores must be non-empty 1-D of one length, got {xs.shape}, {ys.shape}"
        )
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise ValueError(f"{name} and the scores must be finite, got {x!r}, {y!r}")
    if np.any(np.diff(xs) <= 0):
        raise ValueError(f"{name} must increase strictly, got {list(x)!r}")
    return xs, ys
