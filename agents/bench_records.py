"""The records of an ``rla bench`` run and the statistics over them, shared by the report
(``agents.bench_report``) and its plots (``agents.bench_plots``)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Ablation row labels (DESIGN section 1), by loop mode; "+ Env" is mode env with task-pool.
ROW_LABELS = {
    "outcome": "Outcome-only",
    "policy": "Policy",
    "reward": "+ Reward",
    "env": "+ Env",
    "rm-only": "RM-only",
    "oracle": "Oracle votes (not the method)",
    "noisy-oracle": "Noisy oracle votes (not the method)",
    "oracle-potential": "Oracle progress (not the method)",
}
ROW_ORDER = (
    "Before training", "Outcome-only", "Policy", "+ Reward", "+ Env", "RM-only",
    ROW_LABELS["oracle"], ROW_LABELS["noisy-oracle"], ROW_LABELS["oracle-potential"],
)  # fmt: skip


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50 % of the values."""
    from scipy.stats import trim_mean

    return float(trim_mean(np.asarray(values, dtype=float), 0.25)) if len(values) else math.nan


def iqm_ci(strata: Sequence[Sequence[float]], seed: int = 0) -> tuple[float, float, float]:
    """IQM of all values and its 95 % bootstrap CI, resampling within each stratum (env)."""
    from scipy.stats import bootstrap, trim_mean

    samples = [np.asarray(s, dtype=float) for s in strata if len(s)]
    if not samples:
        return math.nan, math.nan, math.nan
    pooled = np.concatenate(samples)
    point = iqm(pooled)
    if any(len(s) < 2 for s in samples):  # a stratum of one run cannot be resampled
        return point, math.nan, math.nan
    if np.ptp(pooled) == 0:  # every run scored the same: the interval is that point
        return point, point, point

    def statistic(*xs: np.ndarray) -> float:
        return float(trim_mean(np.concatenate(xs), 0.25))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = bootstrap(
            samples, statistic, n_resamples=2000, confidence_level=0.95, method="percentile",
            vectorized=False, rng=np.random.default_rng(seed),
        )  # fmt: skip
    return point, float(result.confidence_interval.low), float(result.confidence_interval.high)


def tiers(run: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The run's evaluation levels: in-domain (within its training range), then harder ones."""
    top = run["settings"]["max_difficulty"]
    levels = list(run["evaluations"][0]["success"])
    return [lv for lv in levels if float(lv) <= top], [lv for lv in levels if float(lv) > top]


def score(evaluation: dict[str, Any], levels: list[str]) -> float:
    """Mean success of one evaluation over ``levels`` (NaN without levels)."""
    return float(np.mean([evaluation["success"][lv] for lv in levels])) if levels else math.nan


def row_label(run: dict[str, Any]) -> str:
    """The ablation row (or strategy) a run belongs to."""
    spec = run["spec"]
    if spec["mode"] == "env" and spec["strategy"] != "task-pool":
        return f"+ Env ({spec['strategy']})"
    return ROW_LABELS[spec["mode"]]
