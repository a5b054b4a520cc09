"""RLAnything's integrated feedback: outcome plus process reward from PRM votes.

Per step (the paper's code, lambda = 1, m = 3):  R_i = O + (lambda / m) * sum_j S_ij.
Per trajectory (lambda = 0.2):       R = O + (lambda / T) * sum_t score_t.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from agents.reward_model import ProcessRewardModel
from agents.trajectories import Trajectory
from rla_gym.core import final_outcome


def _check_lam_m(lam: float, m: int | None = None) -> None:
    if (
        isinstance(lam, bool)
        or not isinstance(lam, (int, float, np.floating, np.integer))
        or not math.isfinite(lam)
        or lam < 0
    ):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    if m is not None and (isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1):
        raise ValueError(f"m must be an integer >= 1, got {m!r}")


def integrated_step_rewards(outcome: int, votes: Any, lam: float = 1.0) -> np.ndarray:
    """R_i = O + (lambda / m) * sum_j S_ij for every step i; ``votes`` has shape (steps, m).

    Examples:
        >>> integrated_step_rewards(-1, [[1, 1, -1], [-1, -1, -1]]).tolist()
        [-0.6666666666666667, -2.0]
    """
    v = np.asarray(votes, dtype=np.float64)
    if v.ndim != 2:
        raise ValueError(f"votes must have shape (steps, m), got {v.shape}")
    _check_lam_m(lam, v.shape[1])
    if outcome not in (1, -1):
        raise ValueError(f"outcome must be +1 or -1, got {outcome!r}")
    if not np.isin(v, (-1.0, 1.0)).all():
        raise ValueError("votes must be +1 or -1")
    return outcome + lam * v.mean(axis=1)


def integrated_trajectory_reward(outcome: int, scores: Any, lam: float = 0.2) -> float:
    """R = O + (lambda / T) * sum_t score_t, with step scores in [-1, 1].

    Examples:
        >>> integrated_trajectory_reward(1, [1.0, -0.5, 0.5, 0.0])
        1.05
    """
    _check_lam_m(lam)
    if outcome not in (1, -1):
        raise ValueError(f"outcome must be +1 or -1, got {outcome!r}")
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0 or not np.isfinite(s).all() or np.abs(s).max() > 1:
        raise ValueError(f"scores must be a non-empty sequence in [-1, 1], got {scores!r}")
    return float(outcome + lam * s.mean())


def integrated_rewards(
    prm: ProcessRewardModel,
    trajectories: Sequence[Trajectory],
    *,
    lam: float = 1.0,
    m: int = 3,
    generator: torch.Generator | None = None,
) -> list[np.ndarray]:
    """Per-step integrated rewards of many trajectories, with one batched PRM call (the loop's path)."""
    _check_lam_m(lam, m)
    if not trajectories:
        return []
    votes = prm.votes(prm.steps(trajectories), m, generator=generator).cpu().numpy()
    bounds = np.cumsum([0] + [len(t) for t in trajectories])
    return [
        integrated_step_rewards(t.outcome, votes[a:b], lam)
        for t, a, b in zip(trajectories, bounds[:-1], bounds[1:], strict=True)
    ]


class ProcessRewardWrapper(gym.Wrapper[Any, Any, Any, Any]):
    """Adds the PRM's process reward to each step and its outcome prediction at the last step.

    Each step's reward becomes ``env reward + (lam / m) * sum_j S_j`` over m PRM votes on
    (observation, action, next observation); the votes go to ``info["rm_step_votes"]``. At the
    last step ``info["rm_votes"]`` holds the episode's votes, shape (steps, m), and
    ``info["rm_outcome_prediction"]`` the PRM's predicted outcome, so
    ``AdaptiveDifficultyWrapper(ProcessRewardWrapper(env, prm))`` works with any algorithm.
    Needs ``obs_mode="dict"``. (The outcome O itself arrives as the env's sparse reward.)

    Examples:
        >>> import gymnasium as gym, numpy as np, rla_gym
        >>> env = gym.make("RLA-TextNav-v0")
        >>> env = ProcessRewardWrapper(env, ProcessRewardModel.for_env(env, device="cpu", seed=0))
        >>> obs, info = env.reset(seed=0)
        >>> _, reward, *_, info = env.step(int(np.flatnonzero(info["oracle_mask"])[0]))
        >>> info["rm_step_votes"].shape
        (3,)
    """

    #: Tells ``AdaptiveDifficultyWrapper`` that the last step's info holds the RM's prediction.
    writes_rm_outcome_prediction = True

    def __init__(
        self, env: gym.Env[Any, Any], prm: ProcessRewardModel, *, lam: float = 1.0, m: int = 3, seed: int = 0
    ) -> None:
        super().__init__(env)
        _check_lam_m(lam, m)
        if (
            not isinstance(env.observation_space, gym.spaces.Dict)
            or "tokens" not in env.observation_space.spaces
        ):
            raise TypeError("ProcessRewardWrapper needs obs_mode='dict' (token observations)")
        self.prm, self.lam, self.m = prm, float(lam), m
        self.generator = torch.Generator(device=prm.device).manual_seed(seed)
        self._obs: np.ndarray | None = None
        self._scores: list[float] = []
        self._votes: list[np.ndarray] = []

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._obs, self._scores, self._votes = obs["tokens"], [], []
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        device = self.prm.device
        steps = {
            "obs": torch.as_tensor(self._obs, device=device).unsqueeze(0),
            "action": torch.as_tensor([int(action)], device=device),
            "next_obs": torch.as_tensor(obs["tokens"], device=device).unsqueeze(0),
        }
        votes_t, scores = self.prm.votes_and_scores(steps, self.m, generator=self.generator)
        votes = votes_t[0].cpu().numpy()
        self._scores.append(float(scores[0]))
        self._votes.append(votes)
        info["rm_step_votes"] = votes
        if terminated or truncated:
            info["rm_outcome_prediction"] = self._predict(obs)
            info["rm_votes"] = np.stack(self._votes)
        self._obs = obs["tokens"]
        # the method's O in {+1, -1} at the last step, not the env's own reward (1 or 0)
        outcome = final_outcome(info) if terminated or truncated else 0
        return obs, outcome + self.lam * float(votes.mean()), terminated, truncated, info

    @torch.no_grad()
    def _predict(self, final_obs: Any) -> float:
        if self.prm.head == "value":
            final = torch.as_tensor(final_obs["tokens"], device=self.prm.device).unsqueeze(0)
            return float(self.prm.values(final).clamp(-1, 1)[0])
        return float(np.mean(self._scores))
