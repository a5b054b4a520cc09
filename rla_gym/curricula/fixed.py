"""No adaptation: one difficulty, or domain randomisation over a range."""

from __future__ import annotations

from rla_gym.core import Task, normalize_difficulty
from rla_gym.curricula.base import Curriculum, check_bounds


class FixedCurriculum(Curriculum):
    """Every task at one difficulty, with a fresh task seed each episode.

    Examples:
        >>> c = FixedCurriculum("RLA-TextNav-v0", 0.3)
        >>> c.next_task().difficulty
        0.3
    """

    def __init__(self, env_id: str, difficulty: float, *, seed: int = 0) -> None:
        super().__init__(env_id, seed=seed)
        self.difficulty = normalize_difficulty(difficulty)

    def next_task(self, slot: int = 0) -> Task:
        return self.new_task(self.difficulty)

    def metrics(self) -> dict[str, float]:
        return {**super().metrics(), "difficulty": self.difficulty}


class UniformCurriculum(Curriculum):
    """Domain randomisation: difficulty ~ U(bounds) per episode.

    Examples:
        >>> c = UniformCurriculum("RLA-TextNav-v0", bounds=(0.2, 0.4))
        >>> 0.2 <= c.next_task().difficulty <= 0.4
        True
    """

    def __init__(self, env_id: str, *, bounds: tuple[float, float] = (0.0, 1.0), seed: int = 0) -> None:
        super().__init__(env_id, seed=seed)
        self.low, self.high = check_bounds(bounds)

    def next_task(self, slot: int = 0) -> Task:
        return self.new_task(float(self.rng.uniform(self.low, self.high)))
