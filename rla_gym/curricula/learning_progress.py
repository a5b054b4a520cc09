"""Learning progress over difficulty bins (Kanitscheider et al. 2021; Syllabus's LP)."""

from __future__ import annotations

import numpy as np

from rla_gym.core import Task, check_difficulty
from rla_gym.curricula.base import Curriculum, EpisodeResult, check_bounds, check_positive


class LearningProgressCurriculum(Curriculum):
    """Sample difficulty bins in proportion to |fast EMA - slow EMA| of their success.

    Per bin b: fast_b <- a s + (1 - a) fast_b and slow_b <- a fast_b + (1 - a) slow_b on each
    finished episode with success s; LP_b = |fast_b - slow_b|. A bin is drawn with
    P = (1 - explore) LP_b / sum(LP) + explore / bins (uniform while no bin has progress),
    bins never tried yet get the largest LP, and the difficulty is uniform within the bin. The
    bins split ``bounds`` evenly.

    Examples:
        >>> c = LearningProgressCurriculum("RLA-TextNav-v0", bins=4)
        >>> c.weights().tolist()  # nothing seen yet: uniform
        [0.25, 0.25, 0.25, 0.25]
    """

    state_fields = ("fast", "slow", "seen")

    def __init__(
        self,
        env_id: str,
        *,
        bins: int = 10,
        ema_alpha: float = 0.1,
        explore: float = 0.1,
        bounds: tuple[float, float] = (0.0, 1.0),
        seed: int = 0,
    ) -> None:
        super().__init__(env_id, seed=seed)
        self.low, self.high = check_bounds(bounds)
        self.bins = check_positive(bins, "bins", integer=True)
        self.ema_alpha = check_difficulty(ema_alpha, "ema_alpha")
        if self.ema_alpha == 0:
            raise ValueError(f"ema_alpha must be > 0, got {ema_alpha!r}")
        self.explore = check_difficulty(explore, "explore")
        self.fast = [0.0] * self.bins
        self.slow = [0.0] * self.bins
        self.seen = [0] * self.bins

    def bin_of(self, difficulty: float) -> int:
        """The bin of ``difficulty`` (the end bins also take difficulties beyond the bounds)."""
        position = (difficulty - self.low) / (self.high - self.low)
        return min(max(int(position * self.bins), 0), self.bins - 1)

    def _edge(self, b: int) -> float:
        return self.low + (self.high - self.low) * b / self.bins

    def weights(self) -> np.ndarray:
        """Sampling probability of each bin."""
        progress = np.abs(np.array(self.fast) - np.array(self.slow))
        unseen = np.array(self.seen) == 0
        progress[unseen] = progress.max() if progress.max() > 0 else 1.0
        uniform = np.full(self.bins, 1.0 / self.bins)
        if progress.sum() == 0:
            return uniform
        return (1.0 - self.explore) * progress / progress.sum() + self.explore * uniform

    def next_task(self, slot: int = 0) -> Task:
        b = int(self.rng.choice(self.bins, p=self.weights()))
        return self.new_task(float(self.rng.uniform(self._edge(b), self._edge(b + 1))))

    def _learn(self, result: EpisodeResult) -> None:
        b, a = self.bin_of(result.task.difficulty), self.ema_alpha
        self.fast[b] = a * result.success + (1 - a) * self.fast[b]
        self.slow[b] = a * self.fast[b] + (1 - a) * self.slow[b]
        self.seen[b] += 1

    def metrics(self) -> dict[str, float]:
        w = self.weights()
        centers = self.low + (self.high - self.low) * (np.arange(self.bins) + 0.5) / self.bins
        return {
            **super().metrics(),
            "expected_difficulty": float(w @ centers),
            "bins_seen": sum(s > 0 for s in self.seen),
        }
