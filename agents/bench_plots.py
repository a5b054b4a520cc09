"""PNG figures of an ``rla bench`` results directory (needs matplotlib: the ``plots`` extra)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.bench_records import iqm_ci, row_label, score, tiers


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("bench plots need matplotlib: pip install 'rla-gym[plots]'") from error
    return plt


def _by_env_and_label(runs: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        grouped[run["spec"]["env"]][row_label(run)].append(run)
    return grouped


def _per_env_figure(out: Path, runs: list[dict[str, Any]], name: str, ylabel: str, draw: Any) -> Path:
    """One panel per env; ``draw(axis, label, group)`` adds one row's line to a panel."""
    plt = _pyplot()
    grouped = _by_env_and_label(runs)
    fig, axes = plt.subplots(1, len(grouped), figsize=(5 * len(grouped) + 2.5, 3.5), squeeze=False)
    for axis, (env, labels) in zip(axes[0], sorted(grouped.items()), strict=True):
        axis.set_prop_cycle(color=plt.get_cmap("tab20").colors)  # up to 20 rows, each its own colour
        for label, group in sorted(labels.items()):
            draw(axis, label, group)
        axis.set(title=env, xlabel="env steps", ylabel=ylabel, ylim=(-0.02, 1.02))
        axis.grid(alpha=0.3)
    if axes[0][-1].get_legend_handles_labels()[0]:
        axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    path = out / name
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _draw_success(axis: Any, label: str, group: list[dict[str, Any]]) -> None:
    steps = [e["step"] for e in group[0]["evaluations"]]
    stats = []
    for k in range(len(steps)):
        values = [score(r["evaluations"][k], tiers(r)[0]) for r in group if len(r["evaluations"]) > k]
        stats.append(iqm_ci([values]))
    point, low, high = (np.array(column) for column in zip(*stats, strict=True))
    axis.plot(steps, point, label=label)
    axis.fill_between(steps, low, high, alpha=0.2)


def _draw_difficulty(axis: Any, label: str, group: list[dict[str, Any]]) -> None:
    length = min(len(r["history"]) for r in group)
    if length == 0:
        return
    steps = [row["step"] for row in group[0]["history"][:length]]
    values = np.array(
        [[row.get("loop/difficulty", math.nan) for row in r["history"][:length]] for r in group]
    )
    axis.plot(steps, np.nanmean(values, axis=0), label=label)


def plot_curves(out: Path, runs: list[dict[str, Any]]) -> Path:
    """In-domain success against env steps per row, IQM over seeds with a 95 % bootstrap band."""
    return _per_env_figure(out, runs, "curves.png", "in-domain success (IQM)", _draw_success)


def plot_difficulty(out: Path, runs: list[dict[str, Any]]) -> Path:
    """Mean training difficulty per rollout against env steps, one line per row, mean over seeds."""
    return _per_env_figure(out, runs, "difficulty.png", "training difficulty", _draw_difficulty)


def plot_precision(out: Path, runs: list[dict[str, Any]]) -> Path | None:
    """Empirical precision A(m) of each row's final PRM beside the bound 1 - exp(-m (mu-1)^2 / 4).

    The Policy row's PRM is frozen (untrained). The bound assumes i.i.d. votes across steps;
    real step probabilities vary, so A(m) levels off at about P(p+ > p-).
    """
    from rla_gym.stats import precision_bound

    plt = _pyplot()
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        if run.get("rm_after") and run["rm_after"]["precision"]:
            rows[row_label(run)].append(run["rm_after"])
    if not rows:
        return None
    fig, axis = plt.subplots(figsize=(5.5, 3.8))
    for label, metrics in sorted(rows.items()):
        ms = [p["m"] for p in metrics[0]["precision"]]
        empirical = np.mean([[p["A"] for p in r["precision"]] for r in metrics], axis=0)
        line = axis.plot(ms, empirical, marker="o", label=f"{label}: A(m)")[0]
        mu = float(np.nanmean([r["mu"] for r in metrics]))
        if math.isfinite(mu):
            bound = [precision_bound(mu, m) for m in ms]
            axis.plot(ms, bound, linestyle="--", color=line.get_color(), label=f"bound, mu={mu:.2f}")
    axis.set(
        xscale="log", xlabel="votes m", ylabel="P(S+ > S-)", ylim=(-0.02, 1.02),
        title="final PRM, held-out steps (bound assumes i.i.d. votes)",
    )  # fmt: skip
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    fig.tight_layout()
    path = out / "precision.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_profiles(out: Path, profiles: dict[str, list[float]], taus: Sequence[float]) -> Path | None:
    """``profiles.png``: per row, the share of runs whose normalised score exceeds tau."""
    if not profiles:
        return None
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(5.5, 3.5))
    for label, shares in profiles.items():
        axis.plot(taus, shares, label=label, drawstyle="steps-post")
    axis.set(xlabel="normalised area under success vs difficulty (tau)", ylabel="share of runs > tau",
             ylim=(-0.02, 1.02))  # fmt: skip
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path = out / "profiles.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_all(out: Path, runs: list[dict[str, Any]], summary: dict[str, Any] | None = None) -> list[Path]:
    """Every figure that the runs (and the summary's performance profiles) have data for."""
    if not runs:
        return []
    paths = [plot_curves(out, runs), plot_difficulty(out, runs), plot_precision(out, runs)]
    if summary and summary.get("profiles"):
        from agents.bench_stats import PROFILE_TAUS

        paths.append(plot_profiles(out, summary["profiles"], PROFILE_TAUS))
    return [p for p in paths if p is not None]
