"""The global rule: retune difficulty from the balance of a reward model's outcome errors."""

from __future__ import annotations

from typing import Any

import numpy as np

from rla_gym.core import Task, check_difficulty, normalize_difficulty
from rla_gym.curricula.base import Curriculum, EpisodeResult, check_bounds, check_positive
from rla_gym.stats import error_statistics

#: Which way the balance rule moves difficulty: the stabilising one, or the rule as first written.
DIRECTIONS = ("stabilising", "literal")


class RewardModelBalanceCurriculum(Curriculum):
    """Move one global difficulty by the balance of the RM's outcome errors.

    Every ``interval`` episodes at the current difficulty d, with errors = RM predicted
    outcome - actual outcome: balance = min(p_over, p_under) / max(p_over, p_under);
    balance > ``balance_threshold`` keeps d, and so do errors with no direction (p_over ==
    p_under, say a perfect RM, even at ``balance_threshold=1``); otherwise d moves by ``step``
    within ``bounds``. Results at another difficulty than d do not count.
    After a change the next ``cooldown`` intervals make no change, so d cannot flip every
    interval. Every result must carry ``rm_outcome_prediction``.

    ``direction`` says which way d moves. With outcomes in {+1, -1} and predictions in
    [-1, 1], an error > 0 can only come from a failed episode and an error < 0 only from a
    success, so ``"stabilising"`` (default) raises d when p_under > p_over (successes
    dominate the errors) and lowers it when p_over > p_under: its fixed point is success
    about 1/2 for any RM with symmetric confidence, and a success-band rule at 1/2 for an
    uninformative one. ``"literal"`` is the rule as first written, which raises d when
    p_over > p_under ("the RM over-estimates: tasks too easy"): it makes failing tasks
    harder and drives every run to a bound (kept to reproduce it, tested as diverging).

    Examples:
        >>> from rla_gym.curricula import EpisodeResult
        >>> c = RewardModelBalanceCurriculum("RLA-TextNav-v0", interval=2, start=0.5)
        >>> for _ in range(2):  # the RM predicts failure, the episodes succeed: p_under = 1
        ...     c.update(EpisodeResult(c.next_task(), 1, 1.0, 9, rm_outcome_prediction=-0.6))
        >>> c.difficulty
        0.6
    """

    state_fields = ("difficulty", "predicted", "actual", "cooldown_left", "last", "changes")

    def __init__(
        self,
        env_id: str,
        *,
        start: float | None = None,
        interval: int = 32,
        step: float = 0.1,
        bounds: tuple[float, float] = (0.1, 1.0),
        balance_threshold: float = 0.8,
        cooldown: int = 1,
        direction: str = "stabilising",
        seed: int = 0,
    ) -> None:
        super().__init__(env_id, seed=seed)
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        self.direction = direction
        self.low, self.high = check_bounds(bounds)
        self.interval = check_positive(interval, "interval", integer=True)
        self.step = check_positive(step, "step")
        self.balance_threshold = check_difficulty(balance_threshold, "balance_threshold")
        if isinstance(cooldown, bool) or not isinstance(cooldown, (int, np.integer)):
            raise TypeError(f"cooldown must be a non-negative integer, got {cooldown!r}")
        if cooldown < 0:
            raise ValueError(f"cooldown must be a non-negative integer, got {cooldown!r}")
        self.cooldown = int(cooldown)
        self.difficulty = normalize_difficulty(
            self.low if start is None else check_difficulty(start, "start")
        )
        if not self.low <= self.difficulty <= self.high:
            raise ValueError(f"start must lie within bounds {bounds!r}, got {start!r}")
        self.predicted: list[float] = []
        self.actual: list[int] = []
        self.cooldown_left = 0
        self.last: dict[str, Any] = {}
        self.changes = 0

    def next_task(self, slot: int = 0) -> Task:
        return self.new_task(self.difficulty)

    def _learn(self, result: EpisodeResult) -> None:
        if result.rm_outcome_prediction is None:
            raise ValueError(
                f"{type(self).__name__} needs EpisodeResult.rm_outcome_prediction, got None "
                "(wrap the env with the reward-model wrapper or pass predict_outcome=)"
            )
        if result.task.difficulty != self.difficulty:
            return
        self.predicted.append(float(result.rm_outcome_prediction))
        self.actual.append(result.outcome)
        if len(self.predicted) < self.interval:
            return
        stats = error_statistics(self.predicted, self.actual)
        self.predicted, self.actual = [], []
        decision = self._decide(stats)
        self.last = {**stats, "decision": decision}

    def _decide(self, stats: dict[str, float]) -> str:
        if self.cooldown_left > 0:
            self.cooldown_left -= 1
            return "cooldown"
        if stats["balance"] > self.balance_threshold or stats["p_over"] == stats["p_under"]:
            return "keep"  # a tie has no direction to move in
        successes_dominate = stats["p_under"] > stats["p_over"]
        harder = successes_dominate if self.direction == "stabilising" else not successes_dominate
        delta = self.step if harder else -self.step
        target = normalize_difficulty(min(max(self.difficulty + delta, self.low), self.high))
        if target == self.difficulty:
            return "at bound"
        self.difficulty, self.cooldown_left, self.changes = target, self.cooldown, self.changes + 1
        return "raise" if delta > 0 else "lower"

    def metrics(self) -> dict[str, float]:
        # the same keys from the start (NaN until the first window is judged), as a logger expects
        stats = {
            k: float(self.last.get(k, float("nan"))) for k in ("p_over", "p_under", "balance", "mean_error")
        }
        return {**super().metrics(), "difficulty": self.difficulty, "changes": self.changes, **stats}
