"""A simulated learner and reward model to prove a curriculum on, in numpy only.

A curriculum exists to keep the learner at its frontier. :func:`simulate` checks that without
an env or a network: it drives any :class:`~rla_gym.curricula.Curriculum` through
``next_task`` / ``update`` with a :class:`SimulatedLearner`, whose success probability at
difficulty d is ``sigmoid((skill - d) / width)`` and whose skill grows fastest at the frontier
(success near 1/2) and not at all on tasks it always or never solves, and an optional
:class:`SimulatedRewardModel` whose outcome predictions have a settable quality. The returned
:class:`Simulation` holds the trajectories of difficulty, success and skill, and
:meth:`Simulation.frontier_report` the figures a test asserts on.

Examples:
    >>> from rla_gym.curricula import SuccessBandCurriculum
    >>> sim = simulate(SuccessBandCurriculum("RLA-TextNav-v0", start=1.0), episodes=3000)
    >>> report = sim.frontier_report(warmup=1000)
    >>> 0.2 <= report["success_min"] and report["success_max"] <= 0.8
    True
    >>> bool(sim.skill[-1] > sim.skill[0])  # the learner improved
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rla_gym.core import Task
from rla_gym.curricula.base import Curriculum, EpisodeResult, check_bounds, check_positive

#: Qualities of :class:`SimulatedRewardModel`'s outcome predictions.
RM_QUALITIES = ("calibrated", "noisy", "constant", "over-confident")


class SimulatedLearner:
    """A learner with one skill per env id: P(success | d) = sigmoid((skill - d) / width).

    Training on an episode with success probability p raises the skill by
    ``rate * 4 p (1 - p)`` (at most to ``ceiling``): ``rate`` at the frontier (p = 1/2),
    nothing on tasks it always or never solves; a skill at or above ``ceiling`` stays where it
    is. ``task_spread`` gives each task seed its own offset to the difficulty (normal, that
    standard deviation), so tasks of one level differ.

    Examples:
        >>> learner = SimulatedLearner(skill=0.4)
        >>> learner.success_probability(Task("RLA-TextNav-v0", 0.4, 0))
        0.5
    """

    def __init__(
        self,
        *,
        skill: float = 0.3,
        width: float = 0.1,
        rate: float = 2e-4,
        ceiling: float = 0.8,
        task_spread: float = 0.0,
    ) -> None:
        for name, value in (("skill", skill), ("ceiling", ceiling), ("task_spread", task_spread)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if task_spread < 0:
            raise ValueError(f"task_spread must be >= 0, got {task_spread!r}")
        self.initial_skill = float(skill)
        self.width = check_positive(width, "width")
        self.rate = check_positive(rate, "rate")
        self.ceiling = float(ceiling)
        self.task_spread = float(task_spread)
        self.skills: dict[str, float] = {}

    def skill(self, env_id: str) -> float:
        """The current skill on ``env_id`` (the initial skill until it trains there)."""
        return self.skills.get(env_id, self.initial_skill)

    def success_probability(self, task: Task) -> float:
        """P(success) on ``task`` at the current skill."""
        hardness = task.difficulty
        if self.task_spread:
            hardness += self.task_spread * float(np.random.default_rng(task.seed).standard_normal())
        return float(1.0 / (1.0 + math.exp(-(self.skill(task.env_id) - hardness) / self.width)))

    def train(self, task: Task, p: float) -> None:
        """One episode of training on ``task``, whose success probability was ``p``."""
        skill = self.skill(task.env_id)
        self.skills[task.env_id] = max(skill, min(skill + self.rate * 4.0 * p * (1.0 - p), self.ceiling))


class SimulatedRewardModel:
    """A reward model's predicted outcome in [-1, 1] for an episode of success probability p.

    Qualities: ``"calibrated"`` predicts the expected outcome 2p - 1; ``"noisy"`` adds normal
    noise of standard deviation ``noise`` to it (clipped to [-1, 1]); ``"constant"`` always
    predicts ``constant`` (an uninformative RM); ``"over-confident"`` stretches 2p - 1 by
    ``sharpness`` and clips, so it predicts +1 or -1 on most tasks.

    Examples:
        >>> SimulatedRewardModel("over-confident").predict(0.75, np.random.default_rng(0))
        1.0
    """

    def __init__(
        self,
        quality: str = "calibrated",
        *,
        noise: float = 0.3,
        constant: float = 0.0,
        sharpness: float = 4.0,
    ) -> None:
        if quality not in RM_QUALITIES:
            raise ValueError(f"quality must be one of {RM_QUALITIES}, got {quality!r}")
        if isinstance(constant, bool) or not isinstance(constant, (int, float)) or not -1 <= constant <= 1:
            raise ValueError(f"constant must be in [-1, 1], got {constant!r}")
        self.quality = quality
        self.noise = check_positive(noise, "noise")
        self.constant = float(constant)
        self.sharpness = check_positive(sharpness, "sharpness")

    def predict(self, p: float, rng: np.random.Generator) -> float:
        """The predicted outcome of one episode whose success probability is ``p``."""
        if self.quality == "constant":
            return self.constant
        expected = 2.0 * p - 1.0
        if self.quality == "noisy":
            expected += self.noise * float(rng.standard_normal())
        elif self.quality == "over-confident":
            expected *= self.sharpness
        return float(min(max(expected, -1.0), 1.0))


@dataclass(frozen=True)
class Simulation:
    """Per-episode trajectories of one :func:`simulate` run, in the order episodes finished.

    ``trained`` marks the episodes the learner trained on (``Curriculum.trains_on``);
    ``skill`` is the skill after each episode, on the curriculum's env.
    """

    difficulty: np.ndarray
    success: np.ndarray
    probability: np.ndarray
    skill: np.ndarray
    trained: np.ndarray
    bounds: tuple[float, float]

    def windows(self, values: np.ndarray, size: int, start: int = 0) -> np.ndarray:
        """Means of ``values`` over consecutive windows of ``size`` trained-on episodes from ``start``."""
        picked = values[start:][self.trained[start:]]
        count = len(picked) // size
        return picked[: count * size].reshape(count, size).mean(axis=1)

    def frontier_report(self, *, warmup: int, window: int = 200, margin: float = 0.1) -> dict[str, float]:
        """What proves a curriculum, over the trained-on episodes after ``warmup`` episodes.

        - ``success_min`` / ``success_max``: the extremes of the success rate over windows of
          ``window`` episodes (a frontier curriculum keeps them inside [0.2, 0.8]);
        - ``tracking_error``: mean |difficulty - skill| over the episodes (the frontier is where
          the difficulty equals the skill);
        - ``skill_correlation``: correlation of the windows' mean difficulty with the skill
          (NaN when either is constant);
        - ``stuck_at_bound``: share of episodes at a bound of ``bounds`` while the skill lies
          more than ``margin`` inside it.
        """
        window = check_positive(window, "window", integer=True)
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
        success = self.windows(self.success.astype(np.float64), window, warmup)
        if success.size == 0:
            raise ValueError(f"no full window of {window} trained-on episodes after warmup {warmup}")
        difficulty = self.windows(self.difficulty, window, warmup)
        skill = self.windows(self.skill, window, warmup)
        d, s = self.difficulty[warmup:][self.trained[warmup:]], self.skill[warmup:][self.trained[warmup:]]
        low, high = self.bounds
        at_low = (d <= low + 1e-9) & (s > low + margin)
        at_high = (d >= high - 1e-9) & (s < high - margin)
        varies = difficulty.size > 1 and difficulty.std() > 0 and skill.std() > 0
        return {
            "success_mean": float(success.mean()),
            "success_min": float(success.min()),
            "success_max": float(success.max()),
            "tracking_error": float(np.abs(d - s).mean()),
            "skill_correlation": float(np.corrcoef(difficulty, skill)[0, 1]) if varies else math.nan,
            "stuck_at_bound": float((at_low | at_high).mean()),
            "skill_gain": float(self.skill[-1] - self.skill[0]),
        }


def simulate(
    curriculum: Curriculum,
    learner: SimulatedLearner | None = None,
    *,
    episodes: int = 5000,
    rm: SimulatedRewardModel | None = None,
    slots: int = 1,
    bounds: tuple[float, float] = (0.0, 1.0),
    seed: int = 0,
) -> Simulation:
    """Drive ``curriculum`` with ``learner`` for ``episodes`` finished episodes.

    ``slots`` envs run side by side: each holds the task the curriculum gave it before its
    previous episode ended, as the vector adapters do, and the slots finish in turn. Each
    :class:`EpisodeResult` carries the outcome (the return is the outcome, as in the loop), a
    length of 5 + 20 d steps, the learner's value estimate 2p - 1 on every step (for PLR's
    scores) and, with ``rm``, the RM's predicted outcome. The learner trains on an episode
    only when ``curriculum.trains_on(task)`` said so when the task was handed out.
    ``bounds`` is the difficulty range the report's ``stuck_at_bound`` refers to.
    """
    if not isinstance(curriculum, Curriculum):
        raise TypeError(f"curriculum must be an rla_gym Curriculum, got {curriculum!r}")
    if learner is not None and not isinstance(learner, SimulatedLearner):
        raise TypeError(f"learner must be a SimulatedLearner or None, got {learner!r}")
    bounds = check_bounds(bounds)
    learner = learner if learner is not None else SimulatedLearner()
    episodes = check_positive(episodes, "episodes", integer=True)
    slots = check_positive(slots, "slots", integer=True)
    rng = np.random.default_rng(seed)
    env_id = curriculum.env_id
    running = [(task, curriculum.trains_on(task)) for task in (curriculum.next_task(i) for i in range(slots))]
    columns: dict[str, list[float]] = {k: [] for k in ("difficulty", "success", "p", "skill", "trained")}
    for episode in range(episodes):
        slot = episode % slots
        task, trains = running[slot]
        p = learner.success_probability(task)
        success = bool(rng.random() < p)
        outcome = 1 if success else -1
        length = 5 + round(20 * task.difficulty)
        curriculum.update(
            EpisodeResult(
                task, outcome, float(outcome), length,
                rm_outcome_prediction=None if rm is None else rm.predict(p, rng),
                value_estimates=np.full(length, 2.0 * p - 1.0),
            )
        )  # fmt: skip
        if trains:
            learner.train(task, p)
        for key, value in zip(
            columns, (task.difficulty, success, p, learner.skill(env_id), trains), strict=True
        ):
            columns[key].append(value)
        nxt = curriculum.next_task(slot)
        running[slot] = (nxt, curriculum.trains_on(nxt))
    return Simulation(
        difficulty=np.array(columns["difficulty"]),
        success=np.array(columns["success"], dtype=bool),
        probability=np.array(columns["p"]),
        skill=np.array(columns["skill"]),
        trained=np.array(columns["trained"], dtype=bool),
        bounds=bounds,
    )
