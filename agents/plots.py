"""PNG plots of a run's curves from its ``progress.csv`` (needs the ``plots`` extra: matplotlib)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

PANELS = (
    ("loop/success", "training success"),
    ("rm/auc", "PRM AUC (exact labels)"),
    ("rm/balanced_accuracy", "PRM balanced accuracy"),
    ("curriculum/pool_difficulty_mean", "curriculum difficulty"),
)


def read_progress(run: str | Path) -> list[dict[str, float]]:
    """The rows of ``progress.csv`` as floats (missing values become NaN)."""
    with open(Path(run) / "progress.csv") as f:
        return [
            {k: float(v) if v not in ("", None) else math.nan for k, v in row.items()}
            for row in csv.DictReader(f)
        ]


def plot_run(run: str | Path, path: str | Path | None = None) -> Path:
    """Write the run's curves (success, PRM quality, difficulty against steps) as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise ImportError("plots need matplotlib: pip install 'rla-gym[plots]'") from error
    rows = read_progress(run)
    steps = [row.get("time/total_timesteps", math.nan) for row in rows]
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 3), constrained_layout=True)
    for axis, (key, title) in zip(axes, PANELS, strict=True):
        axis.plot(steps, [row.get(key, math.nan) for row in rows])
        axis.set_title(title)
        axis.set_xlabel("env steps")
        axis.grid(alpha=0.3)
    out = Path(path) if path is not None else Path(run) / "curves.png"
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
