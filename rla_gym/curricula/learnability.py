"""Sampling For Learnability (SFL; Rutherford et al. 2024): train where p (1 - p) is largest."""

from __future__ import annotations

from typing import Any

from rla_gym.core import Task, check_difficulty
from rla_gym.curricula.base import Curriculum, EpisodeResult, check_bounds, check_positive


class LearnabilityCurriculum(Curriculum):
    """Estimate each candidate task's success p from a few rollouts; train on the highest p (1 - p).

    At the start and then after every ``interval`` training episodes it draws ``candidates``
    new tasks with difficulty ~ U(``bounds``) and hands each out ``rollouts`` times as an
    evaluation rollout (:meth:`trains_on` is False: the learner does not train on it). Once
    every candidate's rollouts are in, the ``buffer_size`` candidates with the highest
    learnability p (1 - p) become the buffer. A training task is a buffered one (uniformly)
    with probability ``buffer_share``, else a fresh task ~ U(``bounds``), as SFL mixes its
    buffer with new levels. Sources: the SFL paper and its MiniGrid config
    (``sfl/train/config/minigrid-sfl.yaml``: buffer of the top levels, half of each batch
    from it); our sizes are scaled to runs of a few thousand episodes.

    Examples:
        >>> from rla_gym.curricula import EpisodeResult
        >>> c = LearnabilityCurriculum("RLA-TextNav-v0", candidates=2, rollouts=2, buffer_size=1)
        >>> tasks = [c.next_task() for _ in range(4)]  # the evaluation rollouts come first
        >>> [c.trains_on(t) for t in tasks]
        [False, False, False, False]
        >>> for task, outcome in zip(tasks, (1, -1, 1, 1)):  # p = 1/2 for one, 1 for the other
        ...     c.update(EpisodeResult(task, outcome, 0.0, 5))
        >>> c.buffer == [tasks[0]]
        True
    """

    state_fields = ("queue", "evaluating", "buffer", "since_refresh", "refreshes")

    def __init__(
        self,
        env_id: str,
        *,
        candidates: int = 32,
        rollouts: int = 4,
        buffer_size: int = 8,
        buffer_share: float = 0.5,
        interval: int = 256,
        bounds: tuple[float, float] = (0.0, 1.0),
        seed: int = 0,
    ) -> None:
        super().__init__(env_id, seed=seed)
        self.low, self.high = check_bounds(bounds)
        self.candidates = check_positive(candidates, "candidates", integer=True)
        self.rollouts = check_positive(rollouts, "rollouts", integer=True)
        self.buffer_size = check_positive(buffer_size, "buffer_size", integer=True)
        if self.buffer_size > self.candidates:
            raise ValueError(
                f"buffer_size must be <= candidates (the buffer keeps the most learnable of them), "
                f"got buffer_size {buffer_size} > candidates {candidates}"
            )
        self.buffer_share = check_difficulty(buffer_share, "buffer_share")
        self.interval = check_positive(interval, "interval", integer=True)
        self.queue: list[Task] = []  # evaluation rollouts still to hand out
        self.evaluating: dict[Task, list[int]] = {}  # candidate -> outcomes so far
        self.buffer: list[Task] = []
        self.since_refresh = 0
        self.refreshes = 0
        self._sample_candidates()

    def _sample_candidates(self) -> None:
        fresh = [self._fresh() for _ in range(self.candidates)]
        self.evaluating = {task: [] for task in fresh}
        self.queue = [task for task in fresh for _ in range(self.rollouts)]
        self.since_refresh = 0

    def _fresh(self) -> Task:
        return self.new_task(float(self.rng.uniform(self.low, self.high)))

    def next_task(self, slot: int = 0) -> Task:
        if self.queue:
            return self.queue.pop(0)
        if self.buffer and self.rng.random() < self.buffer_share:
            return self.buffer[int(self.rng.integers(len(self.buffer)))]
        return self._fresh()

    def next_group(self, slot: int, size: int) -> list[Task]:
        """A group trainer's ``size`` rollouts of one task: a candidate's evaluation rollouts come
        in one group (its queued rollouts are taken out, ``size`` serving up to all of them), so
        evaluating costs one group per candidate, not one per rollout."""
        size = check_positive(size, "size", integer=True)
        if not self.queue:
            return [self.next_task(slot)] * size
        task = self.queue.pop(0)
        for _ in range(size - 1):  # the group's other rollouts stand for the candidate's queued ones
            if task not in self.queue:
                break
            self.queue.remove(task)
        return [task] * size

    def abandon(self, task: Task) -> None:
        """A candidate's rollout that will not be reported is handed out again (the candidates
        are judged once all their rollouts are in)."""
        outcomes = self.evaluating.get(task)
        if outcomes is not None and len(outcomes) + self.queue.count(task) < self.rollouts:
            self.queue.insert(0, task)

    def trains_on(self, task: Task) -> bool:
        """Candidates' rollouts only estimate p; the learner trains on the rest."""
        return task not in self.evaluating

    def _learn(self, result: EpisodeResult) -> None:
        outcomes = self.evaluating.get(result.task)
        if outcomes is None:
            self.since_refresh += 1
            if self.since_refresh >= self.interval and not self.evaluating:
                self._sample_candidates()
            return
        if len(outcomes) < self.rollouts:
            outcomes.append(result.outcome)
        if all(len(o) == self.rollouts for o in self.evaluating.values()):
            self.buffer = sorted(self.evaluating, key=lambda t: -self.learnability(self.evaluating[t]))[
                : self.buffer_size
            ]
            self.evaluating = {}
            self.refreshes += 1

    @staticmethod
    def learnability(outcomes: list[int]) -> float:
        """p (1 - p) of a candidate's outcomes."""
        p = sum(o == 1 for o in outcomes) / len(outcomes)
        return p * (1.0 - p)

    def metrics(self) -> dict[str, Any]:
        difficulties = [task.difficulty for task in self.buffer]
        return {
            **super().metrics(),
            "refreshes": self.refreshes,
            "buffer_difficulty_mean": sum(difficulties) / len(difficulties) if difficulties else float("nan"),
            "evaluating": float(bool(self.evaluating)),
        }
