"""Each curriculum strategy driven by the simulated learner: the curves on the strategy pages.

    python benchmarks/simulated_curricula.py   # about 10 s; needs matplotlib (the dev extra)

Writes ``docs/img/curricula/<strategy>.png`` (difficulty of the trained-on episodes, the
learner's skill, i.e. its frontier, and the success rate, over episodes; one panel per start)
and ``benchmarks/results/simulated_curricula.json`` with each run's frontier report. The
learner and its settings are the ones ``tests/test_curricula_frontier.py`` proves every
strategy on: skill 0.3 rising at most to 0.8, 1e-4 per episode at the frontier, 4 envs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rla_gym.curricula import (
    Curriculum,
    FixedCurriculum,
    FreshTaskPoolCurriculum,
    LearnabilityCurriculum,
    LearningProgressCurriculum,
    PrioritizedLevelReplay,
    RewardModelBalanceCurriculum,
    SimulatedLearner,
    SimulatedRewardModel,
    Simulation,
    SuccessBandCurriculum,
    TaskPoolCurriculum,
    UniformCurriculum,
    simulate,
)

ENV = "RLA-TextNav-v0"
ROOT = Path(__file__).resolve().parent.parent
EPISODES, WARMUP = 10_000, 2_000

#: strategy -> (label, make(start) or make(None) for strategies without a start, RM quality)
STRATEGIES: dict[str, tuple[Callable[[float | None], Curriculum], str | None, tuple[float | None, ...]]] = {
    "fixed": (lambda s: FixedCurriculum(ENV, 0.3), None, (None,)),
    "uniform": (lambda s: UniformCurriculum(ENV), None, (None,)),
    "success-band": (lambda s: SuccessBandCurriculum(ENV, start=s), None, (0.0, 1.0)),
    "rm-balance": (lambda s: RewardModelBalanceCurriculum(ENV, start=s), "noisy", (0.1, 1.0)),
    "rm-balance-literal": (
        lambda s: RewardModelBalanceCurriculum(ENV, start=s, direction="literal"),
        "calibrated",
        (0.1, 1.0),
    ),
    "task-pool": (lambda s: TaskPoolCurriculum(ENV, start=s, dataset_size=32), None, (0.0, 1.0)),
    "task-pool-1000": (lambda s: TaskPoolCurriculum(ENV, start=s), None, (0.0, 1.0)),
    "task-pool-fresh": (lambda s: FreshTaskPoolCurriculum(ENV, start=s), None, (0.0, 1.0)),
    "plr": (lambda s: PrioritizedLevelReplay(ENV), None, (None,)),
    "learning-progress": (lambda s: LearningProgressCurriculum(ENV), None, (None,)),
    "learnability": (lambda s: LearnabilityCurriculum(ENV), None, (None,)),
}


def run(name: str, start: float | None) -> Simulation:
    make, quality, _ = STRATEGIES[name]
    rm = SimulatedRewardModel(quality) if quality else None
    low = 0.1 if name.startswith("rm-balance") else 0.0
    learner = SimulatedLearner(skill=0.3, rate=1e-4, ceiling=0.8)
    return simulate(make(start), learner, episodes=EPISODES, rm=rm, slots=4, bounds=(low, 1.0))


def rolling(values: np.ndarray, width: int = 200) -> np.ndarray:
    kernel = np.ones(width) / width
    return np.convolve(values, kernel, mode="valid")


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = ROOT / "docs" / "img" / "curricula"
    out.mkdir(parents=True, exist_ok=True)
    reports: dict[str, dict[str, dict[str, float]]] = {}
    for name, (_, _, starts) in STRATEGIES.items():
        fig, axes = plt.subplots(1, len(starts), figsize=(5.2 * len(starts), 3.2), squeeze=False)
        reports[name] = {}
        for ax, start in zip(axes[0], starts, strict=True):
            sim = run(name, start)
            reports[name][f"start={start}"] = sim.frontier_report(warmup=WARMUP)
            episodes = np.flatnonzero(sim.trained)
            ax.plot(episodes, sim.difficulty[sim.trained], ".", ms=1, alpha=0.15, color="tab:blue")
            trained = sim.difficulty[sim.trained]
            ax.plot(episodes[199:], rolling(trained), color="tab:blue", label="difficulty (trained on)")
            ax.plot(sim.skill, color="black", lw=2, label="skill (the frontier)")
            ax.plot(episodes[199:], rolling(sim.success[sim.trained].astype(float)), color="tab:orange",
                    label="success rate")  # fmt: skip
            ax.axhspan(0.2, 0.8, color="tab:orange", alpha=0.07)
            ax.set_ylim(-0.02, 1.02)
            ax.set_xlabel("episode")
            ax.set_title(name if start is None else f"{name}, start {start}", fontsize=10)
        axes[0][0].legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=90)
        plt.close(fig)
    rounded = {
        n: {s: {k: round(v, 3) for k, v in r.items()} for s, r in runs.items()} for n, runs in reports.items()
    }
    path = ROOT / "benchmarks" / "results" / "simulated_curricula.json"
    path.write_text(json.dumps(rounded, indent=1) + "\n")
    for name, runs in rounded.items():
        for start, r in runs.items():
            print(f"{name:20s} {start:10s} success {r['success_min']:.2f}-{r['success_max']:.2f} "
                  f"tracking {r['tracking_error']:.2f} corr {r['skill_correlation']:.2f} "
                  f"stuck {r['stuck_at_bound']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
