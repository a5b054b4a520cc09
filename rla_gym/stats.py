"""Reward-model statistics of the RLAnything method, in numpy.

- :func:`error_statistics`: how a reward model's predicted outcomes err (the rm-balance
  curriculum reads its ``balance``).
- :func:`vote_statistics`: p+, p- and mu of Theorem 1 from step votes and outcomes.
- :func:`precision_bound`: the theorem's lower bound on aggregate precision.
- :func:`group_advantages`: the paper's per-step-index z-scores across a group of rollouts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def _as_finite_1d(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64).ravel()
    bad = ~np.isfinite(array)
    if bad.any():
        raise ValueError(
            f"{name} must be finite, got {array[bad][0].item()!r} at index {int(np.flatnonzero(bad)[0])}"
        )
    return array


def _check_outcomes(outcomes: np.ndarray, name: str) -> None:
    bad = (outcomes != 1) & (outcomes != -1)
    if bad.any():
        raise ValueError(f"{name} must be +1 or -1, got {outcomes[bad][0].item()!r}")


def error_statistics(predicted: Any, actual: Any) -> dict[str, float]:
    """Statistics of ``error = predicted - actual`` outcome.

    ``predicted`` in [-1, 1] (the RM's outcome prediction), ``actual`` in {+1, -1}.
    ``balance = min(p_over, p_under) / max(p_over, p_under)``; when the RM made no
    error at all (0/0) the balance is 1.0: nothing is lopsided.

    Examples:
        >>> s = error_statistics([0.5, -0.5, 1.0, -1.0], [-1, 1, 1, -1])
        >>> s["p_over"], s["p_under"], s["balance"]
        (0.25, 0.25, 1.0)
    """
    pred = _as_finite_1d(predicted, "predicted")
    act = _as_finite_1d(actual, "actual")
    if pred.shape != act.shape:
        raise ValueError(f"predicted and actual differ in length: {pred.size} != {act.size}")
    if pred.size == 0:
        raise ValueError("error_statistics needs at least one episode, got none")
    outside = np.abs(pred) > 1
    if outside.any():
        raise ValueError(f"predicted must be in [-1, 1], got {pred[outside][0].item()!r}")
    _check_outcomes(act, "actual")
    errors = pred - act
    p_over = float(np.mean(errors > 0))
    p_under = float(np.mean(errors < 0))
    high = max(p_over, p_under)
    return {
        "p_over": p_over,
        "p_under": p_under,
        "balance": 1.0 if high == 0 else min(p_over, p_under) / high,
        "mean_error": float(errors.mean()),
        "std_error": float(errors.std()),
        "episodes": float(errors.size),
    }


def vote_statistics(votes: Any, outcomes: Any) -> dict[str, float]:
    """p+ = P(vote = +1 | step of a successful trajectory), p- = P(vote = -1 | failed), mu = p+ + p-.

    ``votes``: shape (steps, m) of +1/-1; ``outcomes``: shape (steps,), the outcome of each
    step's trajectory. A probability with no steps to estimate it from is NaN, and so is mu.

    Examples:
        >>> vote_statistics([[1, 1, -1], [-1, -1, -1]], [1, -1])
        {'p_plus': 0.6666666666666666, 'p_minus': 1.0, 'mu': 1.6666666666666665}
    """
    v = np.asarray(votes, dtype=np.float64)
    if v.ndim == 1:
        v = v[:, None]
    if v.ndim != 2:
        raise ValueError(f"votes must have shape (steps, m), got shape {v.shape}")
    o = _as_finite_1d(outcomes, "outcomes")
    if o.size != v.shape[0]:
        raise ValueError(f"votes has {v.shape[0]} steps but outcomes has {o.size}")
    _check_outcomes(_as_finite_1d(v, "votes"), "votes")
    _check_outcomes(o, "outcomes")
    success, failure = v[o == 1], v[o == -1]
    p_plus = float(np.mean(success == 1)) if success.size else math.nan
    p_minus = float(np.mean(failure == -1)) if failure.size else math.nan
    return {"p_plus": p_plus, "p_minus": p_minus, "mu": p_plus + p_minus}


def precision_bound(mu: float, m: int) -> float:
    """Theorem 1's bound 1 - exp(-m (mu - 1)^2 / 4) for mu > 1; 0.0 (no guarantee) otherwise.

    Examples:
        >>> round(precision_bound(1.5, 12), 4)
        0.5276
    """
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m must be a positive integer, got {m!r}")
    if not isinstance(mu, (int, float, np.floating, np.integer)) or not 0 <= float(mu) <= 2:
        raise ValueError(f"mu must be in [0, 2], got {mu!r}")
    if mu <= 1:
        return 0.0
    return 1.0 - math.exp(-m * (float(mu) - 1.0) ** 2 / 4.0)


def group_advantages(rewards: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per-step-index z-scores of one group's per-step rewards (one array per trajectory).

    At step index i the z-score runs over the trajectories that have a step i, with the
    population std; an index only one trajectory reaches keeps that trajectory's raw reward;
    a zero std gives 0.
    """
    arrays = [np.asarray(r, dtype=np.float64) for r in rewards]
    advantages = [np.zeros_like(r) for r in arrays]
    longest = max((len(r) for r in arrays), default=0)
    for i in range(longest):
        reach = [k for k, r in enumerate(arrays) if len(r) > i]
        values = np.array([arrays[k][i] for k in reach])
        if len(reach) == 1:
            advantages[reach[0]][i] = values[0]
            continue
        std = values.std()
        if std > 0:
            for k, z in zip(reach, (values - values.mean()) / std, strict=True):
                advantages[k][i] = z
    return advantages
