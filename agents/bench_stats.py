"""Paired comparisons of ``rla bench`` rows: the study's statistics beyond per-row intervals.

Every run of a bench is evaluated on the same held-out tasks, and runs with the same (env,
seed) start from the same policy, so two rows are compared on **paired** runs: the pairs are
the (env, seed) both rows ran. Per comparison:

- the mean paired difference of the runs' scores, with a 95 % bootstrap interval that
  resamples seeds within each env (stratified);
- the probability of improvement P(X > Y), paired: the share of the pairs in which X scores
  higher (ties count half), averaged over envs as ``rliable`` averages over tasks (``rliable``'s
  own estimator compares every run of X with every run of Y, pairs or not);
- a two-sided sign-flip permutation test of the mean difference (exact up to 2^16 pairs' sign
  patterns, Monte Carlo beyond), and over the pre-declared family of comparisons Holm's
  step-down correction of those p-values.

A comparison *resolves* when its Holm-adjusted p is below 0.05; otherwise the data cannot
tell the rows apart at this number of seeds, which is not the same as "no difference". With n
pairs the exact test's smallest p is 2 / 2^n, and Holm multiplies the smallest p of a family
of k comparisons by k, the next by k - 1, and so on. ``can_resolve`` says whether any data
could make a comparison resolve, given its pairs and those of the family's others
(:func:`best_holm_p`); when every comparison has n pairs that is k * 2 / 2^n < 0.05 (5 pairs
never; 8 pairs for a family of up to 6, 9 for up to 12).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

#: The comparisons the study declares before it runs: (better?, baseline). The paper's
#: ordering Before < Policy < + Reward < + Env, the full loop against Outcome-only, and the
#: paper's task pool against every other strategy under the full loop (added per bench).
ORDERING = (
    ("Policy", "Before training"),
    ("+ Reward", "Policy"),
    ("+ Env", "+ Reward"),
    ("+ Env", "Outcome-only"),
)
#: Adjusted p-values below this resolve a comparison.
ALPHA = 0.05
#: Thresholds of the performance profiles (share of runs whose normalised score exceeds each).
PROFILE_TAUS = tuple(round(0.1 * k, 1) for k in range(11))

Pairs = Mapping[tuple[str, int], float]


def paired(x: Pairs, y: Pairs) -> dict[str, list[tuple[float, float]]]:
    """The (x, y) scores of every (env, seed) both rows ran, by env; NaN scores are dropped."""
    by_env: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for key in sorted(set(x) & set(y)):
        a, b = x[key], y[key]
        if not (math.isnan(a) or math.isnan(b)):
            by_env[key[0]].append((a, b))
    return dict(by_env)


def probability_of_improvement(by_env: Mapping[str, Sequence[tuple[float, float]]]) -> float:
    """P(X > Y) over the pairs of each env (ties half), averaged over envs; NaN without pairs.

    Examples:
        >>> probability_of_improvement({"A": [(1.0, 0.0), (0.5, 0.5)], "B": [(0.0, 1.0)]})
        0.375
    """
    per_env = [
        float(np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs]))
        for pairs in by_env.values()
        if pairs
    ]
    return float(np.mean(per_env)) if per_env else math.nan


def sign_flip_p(differences: Sequence[float], rounds: int = 20_000, seed: int = 0) -> float:
    """Two-sided p of a zero mean paired difference under random sign flips (exact up to 16
    pairs, Monte Carlo with ``rounds`` draws beyond). 1.0 when every difference is 0.

    Examples:
        >>> round(sign_flip_p([1.0, 1.0, 1.0, 1.0, 1.0]), 4)  # 2 of 32 sign patterns as extreme
        0.0625
    """
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or not len(d) or not np.isfinite(d).all():
        raise ValueError(f"differences must be a non-empty 1-D finite sequence, got {differences!r}")
    observed = abs(d.mean())
    if observed == 0:
        return 1.0
    if len(d) <= 16:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(rounds, len(d)))
    extreme = int(np.sum(np.abs(signs @ d) / len(d) >= observed - 1e-12))
    if len(d) <= 16:
        return extreme / len(signs)
    return (extreme + 1) / (rounds + 1)  # Monte Carlo: never 0 (Phipson and Smyth 2010)


def smallest_p(pairs: int, rounds: int = 20_000) -> float:
    """The smallest two-sided p :func:`sign_flip_p` can give with ``pairs`` pairs: 2 / 2^n
    (every difference of one sign), or 1 / (rounds + 1) by Monte Carlo beyond 16 pairs.

    Examples:
        >>> smallest_p(5)  # five seeds: no comparison can reach p < 0.05
        0.0625
    """
    if pairs < 1:
        return 1.0
    return 2.0 / 2**pairs if pairs <= 16 else 1.0 / (rounds + 1)


def best_holm_p(own: float, others: Sequence[float]) -> float:
    """The smallest Holm-adjusted p a comparison whose test can give at best ``own`` reaches in a
    family whose other comparisons can give at best ``others`` (:func:`smallest_p` of each).

    It is reached with every comparison at its best: those that can go below ``own`` rank before
    it (lowering its multiplier) unless ranking a prefix of them alone does better.

    Examples:
        >>> best_holm_p(2 / 2**6, [2 / 2**6])  # equal pairs: twice the smallest p
        0.0625
        >>> best_holm_p(2 / 2**6, [2 / 2**9])  # the other can rank first: 6 pairs resolve
        0.03125
    """
    k = len(others) + 1
    before = sorted(p for p in others if p <= own)
    best = k * own
    for s in range(1, len(before) + 1):
        ranked = [*before[:s], own]
        best = min(best, max((k - i) * p for i, p in enumerate(ranked)))
    return min(best, 1.0)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the input order; NaN stays NaN.

    Examples:
        >>> [round(p, 6) for p in holm([0.01, 0.04, 0.03])]
        [0.03, 0.06, 0.06]
    """
    p = np.asarray(pvalues, dtype=np.float64)
    finite = np.flatnonzero(~np.isnan(p))
    adjusted = np.full(len(p), math.nan)
    m = len(finite)
    running = 0.0
    for rank, index in enumerate(finite[np.argsort(p[finite], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return [float(v) for v in adjusted]


def paired_interval(
    by_env: Mapping[str, Sequence[tuple[float, float]]], resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean paired difference X - Y and its 95 % percentile bootstrap interval, resampling the
    pairs within each env (the point is the mean over all pairs)."""
    strata = [np.array([a - b for a, b in pairs]) for pairs in by_env.values() if pairs]
    if not strata:
        return math.nan, math.nan, math.nan
    pooled = np.concatenate(strata)
    point = float(pooled.mean())
    if any(len(s) < 2 for s in strata):
        return point, math.nan, math.nan
    rng = np.random.default_rng(seed)
    total = len(pooled)
    draws = np.zeros(resamples)
    for s in strata:
        picks = rng.integers(0, len(s), size=(resamples, len(s)))
        draws += s[picks].sum(axis=1)
    low, high = np.percentile(draws / total, [2.5, 97.5])
    return point, float(low), float(high)


def compare(
    rows: Mapping[str, Pairs], comparisons: Sequence[tuple[str, str]], seed: int = 0
) -> list[dict[str, Any]]:
    """One result per comparison (x, y) whose rows both exist, Holm-corrected over those."""
    results: list[dict[str, Any]] = []
    for x, y in comparisons:
        if x not in rows or y not in rows:
            continue
        by_env = paired(rows[x], rows[y])
        differences = [a - b for pairs in by_env.values() for a, b in pairs]
        point, low, high = paired_interval(by_env, seed=seed)
        results.append({
            "comparison": f"{x} vs {y}", "pairs": len(differences), "difference": point,
            "low": low, "high": high, "p_improvement": probability_of_improvement(by_env),
            "p": sign_flip_p(differences, seed=seed) if differences else math.nan,
        })  # fmt: skip
    family = [i for i, r in enumerate(results) if not math.isnan(r["p"])]  # Holm's: those with pairs
    for result, adjusted in zip(results, holm([r["p"] for r in results]), strict=True):
        result["p_holm"] = adjusted
        result["resolved"] = bool(adjusted < ALPHA)
    for i in family:  # whether any data could resolve it, given its pairs and the family's
        others = [smallest_p(results[j]["pairs"]) for j in family if j != i]
        results[i]["can_resolve"] = bool(best_holm_p(smallest_p(results[i]["pairs"]), others) < ALPHA)
    for result in results:
        result.setdefault("can_resolve", False)  # no pairs
    return results


def performance_profile(scores: Sequence[float], taus: Sequence[float]) -> list[float]:
    """Share of runs whose score exceeds each tau (Agarwal et al. 2021's performance profile).

    Examples:
        >>> performance_profile([0.1, 0.5, 0.9], [0.0, 0.5, 1.0])
        [1.0, 0.3333333333333333, 0.0]
    """
    values = np.asarray([v for v in scores if not math.isnan(v)], dtype=np.float64)
    if not len(values):
        return [math.nan] * len(taus)
    return [float(np.mean(values > tau)) for tau in taus]


def row_pairs(
    runs: Sequence[dict[str, Any]], label_of: Callable[[dict[str, Any]], str], score_of: Any
) -> dict:
    """label -> {(env, seed): score} over ``runs`` (``score_of(run)``, NaN to skip)."""
    rows: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
    for run in runs:
        spec = run["spec"]
        rows[label_of(run)][spec["env"], int(spec["seed"])] = float(score_of(run))
    return dict(rows)
