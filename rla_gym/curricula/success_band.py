"""One global difficulty stepped to keep the recent success rate inside a band."""

from __future__ import annotations

from rla_gym.core import Task, check_difficulty, normalize_difficulty
from rla_gym.curricula.base import Curriculum, EpisodeResult, check_band, check_bounds, check_positive


class SuccessBandCurriculum(Curriculum):
    """Keep the success rate of the last ``window`` episodes in [alpha_low, alpha_high].

    Rule: once ``window`` episodes at the current difficulty d have finished, a success
    rate >= alpha_high moves d to min(d + step, high); a rate <= alpha_low moves it to
    max(d - step, low); after a move the window starts afresh. Only results at the current
    difficulty count: one at another difficulty (say, assigned before a move and still running
    in another env) does not, while one assigned at d before moves that led back to d does.
    Defaults: the paper's thresholds 0.2 / 0.8 (reasoning-gym steps the same way).

    Examples:
        >>> from rla_gym.curricula import EpisodeResult
        >>> c = SuccessBandCurriculum("RLA-TextNav-v0", window=2, step=0.25)
        >>> for _ in range(2):
        ...     c.update(EpisodeResult(c.next_task(), 1, 1.0, 3))
        >>> c.difficulty
        0.25
    """

    state_fields = ("difficulty", "recent", "moves")

    def __init__(
        self,
        env_id: str,
        *,
        start: float = 0.0,
        step: float = 0.1,
        alpha_low: float = 0.2,
        alpha_high: float = 0.8,
        window: int = 32,
        bounds: tuple[float, float] = (0.0, 1.0),
        seed: int = 0,
    ) -> None:
        super().__init__(env_id, seed=seed)
        self.alpha_low, self.alpha_high = check_band(alpha_low, alpha_high, ("alpha_low", "alpha_high"))
        self.low, self.high = check_bounds(bounds)
        self.step = check_positive(step, "step")
        self.window = check_positive(window, "window", integer=True)
        self.difficulty = normalize_difficulty(check_difficulty(start, "start"))
        if not self.low <= self.difficulty <= self.high:
            raise ValueError(f"start must lie within bounds {bounds!r}, got {start!r}")
        self.recent: list[int] = []
        self.moves = 0

    def next_task(self, slot: int = 0) -> Task:
        return self.new_task(self.difficulty)

    def _learn(self, result: EpisodeResult) -> None:
        if result.task.difficulty != self.difficulty:
            return
        self.recent.append(int(result.success))
        del self.recent[: -self.window]
        if len(self.recent) < self.window:
            return
        rate = sum(self.recent) / self.window
        target = self.difficulty
        if rate >= self.alpha_high:
            target = min(self.difficulty + self.step, self.high)
        elif rate <= self.alpha_low:
            target = max(self.difficulty - self.step, self.low)
        target = normalize_difficulty(target)
        if target != self.difficulty:
            self.difficulty, self.recent, self.moves = target, [], self.moves + 1

    def metrics(self) -> dict[str, float]:
        rate = sum(self.recent) / len(self.recent) if self.recent else float("nan")
        return {**super().metrics(), "difficulty": self.difficulty, "success_rate": rate, "moves": self.moves}
