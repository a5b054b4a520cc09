"""Robust Prioritized Level Replay over tasks (Jiang et al. 2021; jaxued / minimax defaults)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rla_gym.core import Task, check_difficulty
from rla_gym.curricula.base import Curriculum, EpisodeResult, check_bounds, check_positive

SCORES = ("positive_value_loss", "max_mc", "value_l1", "rm_error", "external")


def gae(values: np.ndarray, rewards: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """Generalised advantage estimates of one finished episode (no bootstrap after the end)."""
    nxt = np.append(values[1:], 0.0)
    deltas = rewards + gamma * nxt - values
    advantages = np.empty_like(deltas)
    running = 0.0
    for t in range(len(deltas) - 1, -1, -1):
        running = deltas[t] + gamma * lam * running
        advantages[t] = running
    return advantages


class PrioritizedLevelReplay(Curriculum):
    """Robust PLR: replay high-scoring tasks, otherwise try new ones and keep the best.

    With probability ``replay_prob`` (once the buffer is ``min_fill_ratio`` full) a task is
    replayed with P = (1 - c) P_score + c P_stale, where P_score is proportional to
    (1 / rank)^(1 / temperature) and P_stale to the number of draws since the task was last
    drawn (c = ``staleness_coef``); otherwise a new task is drawn with difficulty
    ~ U(``bounds``). A finished episode sets its task's score (the latest one
    counts); a new task enters the buffer if there is room or if it beats the lowest score.

    Scores: ``"positive_value_loss"`` (default, mean max(GAE, 0), needs ``value_estimates``),
    ``"max_mc"`` (mean of the best return ever seen on the task minus V(s_t)), ``"value_l1"``
    (mean |GAE|), ``"rm_error"`` (|RM predicted outcome - outcome|, the RLAnything signal as a
    level score), ``"external"`` (``EpisodeResult.score``).

    ``robust=True`` (default) is Robust PLR: the learner trains only on replayed tasks; a new
    task's episode only scores it (:meth:`trains_on` is False for it), so the policy's
    gradient follows the curated buffer. ``robust=False`` is the original PLR, which trains on
    every episode. Defaults (Jiang et al. 2021, "Replay-Guided Adversarial Environment
    Design"; jaxued's maze PLR): rank prioritisation with temperature 0.3, staleness
    coefficient 0.3, replay probability 0.5, positive value loss.

    Examples:
        >>> from rla_gym.curricula import EpisodeResult
        >>> c = PrioritizedLevelReplay("RLA-TextNav-v0", score="external", replay_prob=0.0)
        >>> for s in (0.1, 0.9):
        ...     c.update(EpisodeResult(c.next_task(), 1, 1.0, 3, score=s))
        >>> c.sampling_weights().round(3).tolist()  # 0.7 * rank weights + 0.3 * staleness
        [0.363, 0.637]
    """

    state_fields = ("levels", "clock", "replayed")

    def __init__(
        self,
        env_id: str,
        *,
        buffer_size: int = 64,
        replay_prob: float = 0.5,
        temperature: float = 0.3,
        staleness_coef: float = 0.3,
        min_fill_ratio: float = 0.5,
        score: str = "positive_value_loss",
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        bounds: tuple[float, float] = (0.0, 1.0),
        robust: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__(env_id, seed=seed)
        if not isinstance(robust, bool):
            raise TypeError(f"robust must be a bool, got {robust!r}")
        self.robust = robust
        self.replayed = 0
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")
        self.score = score
        self.buffer_size = check_positive(buffer_size, "buffer_size", integer=True)
        self.replay_prob = check_difficulty(replay_prob, "replay_prob")
        self.temperature = check_positive(temperature, "temperature")
        self.staleness_coef = check_difficulty(staleness_coef, "staleness_coef")
        self.min_fill_ratio = check_difficulty(min_fill_ratio, "min_fill_ratio")
        self.gamma = check_difficulty(gamma, "gamma")
        self.gae_lambda = check_difficulty(gae_lambda, "gae_lambda")
        self.low, self.high = check_bounds(bounds)
        self.levels: list[dict[str, Any]] = []  # task, score, last (clock at last draw), count
        self.clock = 0

    def sampling_weights(self) -> np.ndarray:
        """Replay probability of each buffered task, in buffer order."""
        scores = np.array([level["score"] for level in self.levels])
        ranks = np.empty(len(scores))
        ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
        by_score = (1.0 / ranks) ** (1.0 / self.temperature)
        by_score /= by_score.sum()
        stale = self.clock - np.array([level["last"] for level in self.levels], dtype=np.float64)
        by_stale = stale / stale.sum() if stale.sum() > 0 else np.full(len(scores), 1.0 / len(scores))
        return (1.0 - self.staleness_coef) * by_score + self.staleness_coef * by_stale

    def _check_state(self, state: dict[str, Any]) -> None:
        if len(state["levels"]) > self.buffer_size:
            raise ValueError(
                f"state holds {len(state['levels'])} levels, more than this buffer_size {self.buffer_size}"
            )

    def next_task(self, slot: int = 0) -> Task:
        self.clock += 1
        full_enough = len(self.levels) >= max(1, self.min_fill_ratio * self.buffer_size)
        if full_enough and self.rng.random() < self.replay_prob:
            level = self.levels[int(self.rng.choice(len(self.levels), p=self.sampling_weights()))]
            level["last"] = self.clock
            self.replayed += 1
            return level["task"]
        return self.new_task(float(self.rng.uniform(self.low, self.high)))

    @property
    def needs_values(self) -> bool:
        """The GAE-based scores and MaxMC read the learner's value estimates."""
        return self.score in ("positive_value_loss", "max_mc", "value_l1")

    def trains_on(self, task: Task) -> bool:
        """Robust PLR trains on replayed tasks only: those in the buffer when handed out."""
        return not self.robust or any(level["task"] == task for level in self.levels)

    def _learn(self, result: EpisodeResult) -> None:
        score = self.episode_score(result)
        for level in self.levels:
            if level["task"] == result.task:
                level["score"], level["count"] = score, level["count"] + 1
                level["best"] = max(level.get("best", result.episode_return), result.episode_return)
                return
        entry = {
            "task": result.task,
            "score": score,
            "last": self.clock,
            "count": 1,
            "best": result.episode_return,
        }
        if len(self.levels) < self.buffer_size:
            self.levels.append(entry)
            return
        lowest = min(range(len(self.levels)), key=lambda i: self.levels[i]["score"])
        if score > self.levels[lowest]["score"]:
            self.levels[lowest] = entry

    def episode_score(self, result: EpisodeResult) -> float:
        """The level score of one episode under this curriculum's ``score`` function."""
        if self.score == "external":
            if result.score is None:
                raise ValueError("score='external' needs EpisodeResult.score, got None")
            return float(result.score)
        if self.score == "rm_error":
            if result.rm_outcome_prediction is None:
                raise ValueError("score='rm_error' needs EpisodeResult.rm_outcome_prediction, got None")
            return abs(result.rm_outcome_prediction - result.outcome)
        if result.value_estimates is None:
            raise ValueError(f"score={self.score!r} needs EpisodeResult.value_estimates, got None")
        values = np.asarray(result.value_estimates, dtype=np.float64).ravel()
        if result.rewards is not None:
            rewards = np.asarray(result.rewards, dtype=np.float64).ravel()
        else:  # sparse reward: the return arrives on the last step
            rewards = np.zeros_like(values)
            rewards[-1:] = result.episode_return
        if values.size == 0 or values.shape != rewards.shape:
            raise ValueError(
                f"value_estimates ({values.size}) and rewards ({rewards.size}) must match and be non-empty"
            )
        if self.score == "max_mc":
            known = next((level.get("best") for level in self.levels if level["task"] == result.task), None)
            best = result.episode_return if known is None else max(known, result.episode_return)
            return float(np.mean(best - values))
        advantages = gae(values, rewards, self.gamma, self.gae_lambda)
        if self.score == "positive_value_loss":
            return float(np.maximum(advantages, 0.0).mean())
        return float(np.abs(advantages).mean())

    def metrics(self) -> dict[str, float]:
        scores = [level["score"] for level in self.levels]
        difficulties = [level["task"].difficulty for level in self.levels]
        return {
            **super().metrics(),
            "buffer_fill": len(self.levels) / self.buffer_size,
            "score_mean": float(np.mean(scores)) if scores else float("nan"),
            "buffer_difficulty_mean": float(np.mean(difficulties)) if difficulties else float("nan"),
            "replayed": self.replayed,
        }
