"""Every adaptive strategy proven on the simulated learner it steers: success inside the band,
difficulty following the rising skill, no run stuck at a bound while the frontier lies inside.

The negative controls (a fixed level, domain randomisation, the design notes' literal
rm-balance direction, an over-confident RM) show that the checks can fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

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
    SuccessBandCurriculum,
    TaskPoolCurriculum,
    UniformCurriculum,
    simulate,
)

ENV = "RLA-TextNav-v0"
EPISODES, WARMUP = 10_000, 2_000


def report(curriculum: Curriculum, rm: SimulatedRewardModel | None = None, seed: int = 0) -> dict[str, float]:
    # skill starts at 0.3 and rises to 0.8 at 1e-4 per episode at the frontier: inside (0, 1)
    sim = simulate(
        curriculum, SimulatedLearner(skill=0.3, rate=1e-4, ceiling=0.8), episodes=EPISODES, rm=rm, slots=4,
        bounds=(0.1, 1.0) if isinstance(curriculum, RewardModelBalanceCurriculum) else (0.0, 1.0), seed=seed,
    )  # fmt: skip
    return sim.frontier_report(warmup=WARMUP, window=200)


def assert_keeps_the_frontier(r: dict[str, float]) -> None:
    assert r["success_min"] >= 0.2 and r["success_max"] <= 0.8, r  # success inside the band
    assert r["skill_correlation"] > 0.5 and r["tracking_error"] < 0.2, r  # difficulty follows the skill
    assert r["stuck_at_bound"] < 0.05, r
    assert r["skill_gain"] > 0.3, r  # the learner it steers improves


RM = {q: SimulatedRewardModel(q) for q in ("calibrated", "noisy", "constant", "over-confident")}
START_CASES: dict[str, Callable[[float, int], Curriculum]] = {
    "success-band": lambda start, seed: SuccessBandCurriculum(ENV, start=start, seed=seed),
    "task-pool (fixed pool)": lambda start, seed: TaskPoolCurriculum(
        ENV, start=start, dataset_size=None, seed=seed
    ),
    "task-pool (data set of 32)": lambda start, seed: TaskPoolCurriculum(
        ENV, start=start, dataset_size=32, seed=seed
    ),
    "task-pool-fresh": lambda start, seed: FreshTaskPoolCurriculum(ENV, start=start, seed=seed),
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("start", [0.0, 1.0])
@pytest.mark.parametrize("name", sorted(START_CASES))
def test_strategy_keeps_the_learner_at_its_frontier_from_either_bound(
    name: str, start: float, seed: int
) -> None:
    assert_keeps_the_frontier(report(START_CASES[name](start, seed), seed=seed))


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("start", [0.1, 1.0])
@pytest.mark.parametrize("quality", ["calibrated", "noisy", "constant"])
def test_rm_balance_keeps_the_frontier_with_any_symmetric_rm(quality: str, start: float, seed: int) -> None:
    curriculum = RewardModelBalanceCurriculum(ENV, start=start, seed=seed)
    assert_keeps_the_frontier(report(curriculum, RM[quality], seed=seed))


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    "make",
    [
        lambda seed: PrioritizedLevelReplay(ENV, seed=seed),
        lambda seed: LearningProgressCurriculum(ENV, seed=seed),
        lambda seed: LearnabilityCurriculum(ENV, seed=seed),
        lambda seed: TaskPoolCurriculum(ENV, dataset_size=32, seed=seed),  # spread over the bounds
    ],
    ids=["plr", "learning-progress", "learnability", "task-pool (data set of 32, spread)"],
)
def test_sampling_strategy_keeps_the_learner_at_its_frontier(
    make: Callable[[int], Curriculum], seed: int
) -> None:
    assert_keeps_the_frontier(report(make(seed), seed=seed))


def test_robust_plr_trains_on_replayed_tasks_only() -> None:
    plr = PrioritizedLevelReplay(ENV, buffer_size=8)
    sim = simulate(plr, episodes=2000, slots=4)
    assert 0.3 < sim.trained.mean() < 0.7  # replay_prob 0.5 once the buffer is half full
    untrained_skill_steps = np.diff(sim.skill)[~sim.trained[1:]]
    assert np.all(untrained_skill_steps == 0)
    assert simulate(PrioritizedLevelReplay(ENV, robust=False), episodes=200).trained.all()


@pytest.mark.parametrize("start", [0.1, 1.0])
def test_literal_rm_balance_direction_diverges_to_a_bound(start: float) -> None:
    r = report(RewardModelBalanceCurriculum(ENV, start=start, direction="literal"), RM["calibrated"])
    assert r["stuck_at_bound"] > 0.9  # the notes' code drives the level away from the learner
    assert r["success_min"] > 0.9 or r["success_max"] < 0.1


def test_over_confident_rm_breaks_the_balance_rule() -> None:
    # an RM that predicts exactly +1 / -1 makes no error on the episodes it gets right, so
    # only its wrong predictions count and the rule walks the level away (docs: rm-balance)
    r = report(RewardModelBalanceCurriculum(ENV, start=0.5), RM["over-confident"])
    assert r["stuck_at_bound"] > 0.9


@pytest.mark.parametrize(
    "curriculum",
    [FixedCurriculum(ENV, 0.3), UniformCurriculum(ENV), TaskPoolCurriculum(ENV, start=0.0)],
    ids=["fixed", "uniform", "task-pool (data set of 1000, seen about once per task)"],
)
def test_non_adaptive_strategies_fail_the_frontier_checks(curriculum: Curriculum) -> None:
    r = report(curriculum)
    with pytest.raises(AssertionError):
        assert_keeps_the_frontier(r)


def test_simulated_learner_and_rm_by_hand() -> None:
    learner = SimulatedLearner(skill=0.5, width=0.1, rate=0.01, ceiling=0.505)
    task = FixedCurriculum(ENV, 0.5).next_task()
    assert learner.success_probability(task) == 0.5
    learner.train(task, 0.5)  # + rate * 4 * 1/4, capped at the ceiling
    assert learner.skill(ENV) == 0.505 and learner.skill("RLA-Other-v0") == 0.5
    learner.train(task, 1.0)  # a task it always solves teaches nothing
    assert learner.skill(ENV) == 0.505
    rng = np.random.default_rng(0)
    assert RM["calibrated"].predict(0.75, rng) == 0.5
    assert RM["constant"].predict(0.9, rng) == 0.0
    assert RM["over-confident"].predict(0.3, rng) == -1.0
    noisy = [RM["noisy"].predict(0.75, rng) for _ in range(2000)]
    assert abs(np.mean(noisy) - 0.5) < 0.03 and min(noisy) >= -1 and max(noisy) <= 1
    with pytest.raises(ValueError, match="quality must be one of"):
        SimulatedRewardModel("psychic")
    with pytest.raises(ValueError, match="width must be > 0"):
        SimulatedLearner(width=0)
    with pytest.raises(TypeError, match="curriculum must be an rla_gym Curriculum, got 'x'"):
        simulate("x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bounds\\[0\\] must be < bounds\\[1\\]"):
        simulate(FixedCurriculum(ENV, 0.3), episodes=10, bounds=(1.0, 0.0))


def test_report_needs_a_full_window() -> None:
    sim = simulate(FixedCurriculum(ENV, 0.3), episodes=100)
    with pytest.raises(ValueError, match="no full window"):
        sim.frontier_report(warmup=50, window=200)
    with pytest.raises(ValueError, match="window must be"):
        sim.frontier_report(warmup=0, window=0)
    with pytest.raises(ValueError, match="warmup must be an integer >= 0, got -1"):
        sim.frontier_report(warmup=-1)
    assert math.isnan(sim.frontier_report(warmup=0, window=50)["skill_correlation"])  # d is constant
