"""The closed loop on the lean batched path: votes, process rewards and trajectories in arrays.

:class:`FeedbackVectorWrapper` is the array counterpart of ``agents.loop_runtime``'s
:class:`~agents.loop_runtime.IntegratedRewardVecEnv` for :class:`agents.batched_ppo.BatchedPPO`:
it wraps ``gym.make_vec``'s batched env (autoreset ``SAME_STEP``), records every step's
(observation tokens, action, next observation tokens, exact label) into arrays, keeps each
running episode's steps in per-sub-env buffers, and when episodes end it writes the PRM's
predicted outcome into ``info["final_info"]["rm_outcome_prediction"]`` (for a
:class:`~rla_gym.wrappers.vector.CurriculumVectorWrapper` around it) and turns them into
:class:`~agents.trajectories.Trajectory` objects for the PRM's training. At a rollout's end
:meth:`FeedbackVectorWrapper.finish_rollout` draws the m votes on every step of the rollout in
one call, as the loop's late votes do, and returns the process rewards.

:class:`BatchedLoopCallback` is :class:`~agents.loop_runtime.RLAnythingCallback` for it: the
PRM's training and diagnostics, the curriculum's metrics, the loop's history rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from agents.loop_runtime import (
    MODE_FLAGS,
    PROCESS_SCALES,
    RLAnythingCallback,
    check_mode,
    check_mu,
    check_voters,
)
from agents.reward_model import PRMTrainer, ProcessRewardModel, draw_votes
from agents.trajectories import Trajectory
from rla_gym.curricula.base import Curriculum

#: Modes the batched path runs (``oracle-potential`` needs the distance before every step: not here).
BATCHED_MODES = tuple(mode for mode in MODE_FLAGS if mode != "oracle-potential")


class FeedbackVectorWrapper(VectorWrapper):
    """Records a batched env's steps for the closed loop's votes, trajectories and predictions.

    The rewards it returns are the outcome part, ``outcome_weight`` * (+1 / -1) at an episode's
    last step (what a curriculum adapter around it sums, as on the SB3 path); the trainer adds
    the process part returned by
    :meth:`finish_rollout` (``process_scale`` ``"step"``: lambda * mean vote on every step;
    ``"episode"``: that divided by the episode's step budget; ``"advantage"``: the mean vote
    itself, which the trainer z-scores over the rollout and adds, times lambda, to the
    advantages). ``mode`` is one of the loop's modes but ``oracle-potential``; ``prm`` is needed
    exactly by the modes whose votes come from a PRM (``policy``, ``reward``, ``env``,
    ``rm-only``). The predicted outcome of a finished episode is the PRM's (V of its last state,
    or its steps' mean expected vote), in mode ``oracle`` the mean of its exact labels, and
    absent in ``noisy-oracle`` (whose votes are drawn at the rollout's end).

    Examples:
        >>> import gymnasium as gym, rla_gym
        >>> envs = FeedbackVectorWrapper(
        ...     gym.make_vec("RLA-TextNav-v0", num_envs=2, difficulty=0.0, autoreset_mode="SameStep"),
        ...     None, mode="oracle")
        >>> _ = envs.reset(seed=0)
        >>> _ = envs.step(np.zeros(2, dtype=np.int64))
        >>> envs.finish_rollout().shape
        (1, 2)
    """

    def __init__(
        self, env: VectorEnv, prm: ProcessRewardModel | None, *, mode: str = "env", lam: float = 1.0,
        m: int = 3, process_scale: str = "step", mu: float = 1.5, seed: int = 0,
    ) -> None:  # fmt: skip
        super().__init__(env)
        self.mode = check_mode(mode)
        if mode not in BATCHED_MODES:
            raise ValueError(f"mode {mode!r} is not for the batched path; it runs {BATCHED_MODES}")
        self.flags = MODE_FLAGS[mode]
        if self.flags.votes == "none":
            raise ValueError("mode 'outcome' casts no votes: train without a FeedbackVectorWrapper")
        if env.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            given = env.metadata.get("autoreset_mode")
            raise ValueError(f"FeedbackVectorWrapper needs autoreset_mode SAME_STEP, got {given!r}")
        check_voters(mode, prm, lam, m)
        if process_scale not in PROCESS_SCALES:
            raise ValueError(f"process_scale must be one of {PROCESS_SCALES}, got {process_scale!r}")
        self.prm, self.lam, self.m, self.mu = prm, float(lam), m, check_mu(mu)
        self.process_scale = process_scale
        self.outcome_weight = self.flags.outcome_weight
        self.rng = np.random.default_rng(seed)  # noisy-oracle's vote flips
        self.generator = torch.Generator(device=prm.device).manual_seed(seed) if prm is not None else None
        n = self.num_envs
        self._last = np.zeros((n, 0), dtype=np.int64)
        self._first = self._last  # each running episode's first observation (set by reset)
        self._tasks = np.zeros(n, dtype=np.int64)
        self._levels = np.zeros(n)
        self._weights = np.full(n, self.lam, dtype=np.float32)
        # the running episodes' steps, one row per sub-env (grown when an episode outlasts them)
        self._length = np.zeros(n, dtype=np.int64)
        self._episode: dict[str, np.ndarray] = {}
        self._rollout: list[tuple[np.ndarray, ...]] = []
        self.finished: list[Trajectory] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the wrapped env. A full reset starts every record afresh (the rollout's steps and
        the trajectories not yet drained are dropped); with ``options["reset_mask"]`` only the
        masked sub-envs start new episodes, and the others' steps, the rollout and the finished
        trajectories are kept."""
        obs, info = self.env.reset(seed=seed, options=options)
        tokens = np.asarray(obs["tokens"])
        mask = None if options is None else options.get("reset_mask")
        if mask is not None and self._episode:  # a partial reset: the other episodes go on
            rows = np.flatnonzero(mask)
            self._length[rows] = 0
            self._first[rows], self._last[rows] = tokens[rows], tokens[rows]
            self._begin(rows, info)
            return obs, info
        n, length = tokens.shape
        self._last = tokens.copy()
        capacity = max(8, int(np.max(info["step_budget"])) + 1)
        self._first = tokens.copy()
        self._episode = {  # its steps' actions, labels and next observations (obs[t] = next_obs[t - 1])
            "after": np.zeros((n, capacity, length), dtype=tokens.dtype),
            "action": np.zeros((n, capacity), dtype=np.int64),
            "label": np.zeros((n, capacity), dtype=np.int64),
        }
        self._length[:] = 0
        self._rollout, self.finished = [], []
        self._begin(np.arange(n), info)
        return obs, info

    def _begin(self, rows: np.ndarray, info: dict[str, Any]) -> None:
        """Episodes start in ``rows``: their task, difficulty and process weight, from ``info``."""
        self._tasks[rows] = info["task_key"][rows]
        self._levels[rows] = info["difficulty"][rows]
        if self.process_scale == "advantage":  # the trainer weights the z-scores by lambda
            self._weights[rows] = 1.0
        elif self.process_scale == "episode":
            self._weights[rows] = self.lam / info["step_budget"][rows]
        else:
            self._weights[rows] = self.lam

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        # a copy: the rollout keeps it, and a caller may reuse its buffer for the next step
        actions = np.array(actions, dtype=np.int64).reshape(self.num_envs)
        obs, _, terminated, truncated, info = self.env.step(actions)
        rewards = self.outcome_weight * (terminated.astype(np.float64) - truncated.astype(np.float64))
        tokens = np.asarray(obs["tokens"])
        after, progress = tokens.copy(), info["progress"].copy()
        ended = np.flatnonzero(terminated | truncated)
        final = info.get("final_info", {})
        if ended.size:  # the finished episodes' last observations and labels
            after[ended] = np.stack([info["final_obs"][i]["tokens"] for i in ended])
            progress[ended] = final["progress"][ended]
        labels = np.where(progress == 1, 1, -1)
        self._rollout.append((self._last, actions, after, labels, self._weights.copy()))
        if np.any(self._length >= self._episode["action"].shape[1]):
            self._grow()
        rows, at = np.arange(self.num_envs), self._length
        episode = self._episode
        episode["after"][rows, at] = after
        episode["action"][rows, at], episode["label"][rows, at] = actions, labels
        self._length += 1
        if ended.size:
            self._end(ended, after, final, info)
            self._first[ended] = tokens[ended]
        self._last = tokens.copy()
        return obs, rewards, terminated, truncated, info

    def _grow(self) -> None:
        for key, array in self._episode.items():
            grown = np.zeros((array.shape[0], 2 * array.shape[1], *array.shape[2:]), dtype=array.dtype)
            grown[:, : array.shape[1]] = array
            self._episode[key] = grown

    def _end(self, ended: np.ndarray, after: np.ndarray, final: dict[str, Any], info: dict[str, Any]) -> None:
        """Episodes ended in ``ended``: trajectories, the PRM's predicted outcomes, new episodes.

        Their steps are gathered from the episode buffers in one go, the trajectories being
        consecutive slices of the gathered arrays."""
        episode, lengths = self._episode, self._length[ended]
        starts = np.cumsum(lengths) - lengths
        rows = np.repeat(ended, lengths)
        cols = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)
        next_obs = episode["after"][rows, cols]
        obs = np.empty_like(next_obs)  # a step's observation is the step before's next one ...
        obs[1:] = next_obs[:-1]
        obs[starts] = self._first[ended]  # ... but an episode's first
        actions, labels = episode["action"][rows, cols], episode["label"][rows, cols]
        new = [
            Trajectory(obs[a:b], actions[a:b], next_obs[a:b], outcome, str(task), labels[a:b], level)
            for a, b, outcome, task, level in zip(
                starts.tolist(), (starts + lengths).tolist(), final["outcome"][ended].astype(int).tolist(),
                self._tasks[ended].tolist(), self._levels[ended].tolist(), strict=True,
            )
        ]  # fmt: skip
        self.finished.extend(new)
        if self.flags.votes in ("prm", "exact"):
            prediction, reported = np.zeros(self.num_envs), np.zeros(self.num_envs, dtype=bool)
            steps = (obs, actions, next_obs, labels)
            prediction[ended], reported[ended] = self._predict(steps, starts, lengths, after[ended]), True
            final["rm_outcome_prediction"], final["_rm_outcome_prediction"] = prediction, reported
        self._length[ended] = 0
        self._begin(ended, info)

    def _predict(
        self, steps: tuple[np.ndarray, ...], starts: np.ndarray, lengths: np.ndarray, last: np.ndarray
    ) -> np.ndarray:
        """The PRM's predicted outcome of each finished episode (its steps ``steps[0][a:a + k]``
        for each start a and length k): V of its last state (the value head), its steps' mean
        expected vote (the step head), in [-1, 1]; without a PRM (mode ``oracle``) the mean of
        its exact labels, as the SB3 path's."""
        obs, actions, next_obs, labels = steps
        if self.prm is None:
            return np.add.reduceat(labels.astype(np.float64), starts) / lengths
        if self.prm.head == "value":
            return np.clip(self.prm.values_array(last), -1.0, 1.0)
        _, estimates = self.prm.probabilities(obs, actions, next_obs)
        return np.clip(np.add.reduceat(estimates, starts) / lengths, -1.0, 1.0)

    def finish_rollout(self) -> np.ndarray:
        """The process part (steps since the last call, n_envs), votes drawn now in one call.

        With ``process_scale="advantage"`` it is the mean vote, not yet weighted by lambda. The
        last rollout's votes stay in :attr:`rollout_votes` (steps, n_envs, m).
        """
        if not self._rollout:
            return np.zeros((0, self.num_envs), dtype=np.float32)
        columns = zip(*self._rollout, strict=True)
        before, actions, after, labels, weights = (np.stack(column) for column in columns)
        self._rollout = []
        steps, n = actions.shape
        if self.prm is not None:  # each sub-env's steps in a row: V of a state shared by two steps once
            length = before.shape[-1]
            p, _ = self.prm.probabilities(
                before.swapaxes(0, 1).reshape(-1, length), actions.T.reshape(-1),
                after.swapaxes(0, 1).reshape(-1, length),
            )  # fmt: skip
            votes = draw_votes(p, self.m, self.generator).reshape(n, steps, self.m).swapaxes(0, 1)
        else:  # the oracle modes: the exact label, flipped with probability 1 - mu / 2 (noisy)
            votes = np.repeat(labels[..., None].astype(np.float32), self.m, axis=2)
            if self.flags.votes == "noisy":
                votes = np.where(self.rng.random(votes.shape) < self.mu / 2, votes, -votes)
        self.rollout_votes = votes
        return (weights * votes.mean(axis=2)).astype(np.float32)

    def set_attr(self, name: str, values: Any) -> None:
        """The wrapped env's ``set_attr`` (a curriculum adapter pins each sub-env's task with it)."""
        self.env.set_attr(name, values)  # type: ignore[attr-defined]

    def discard_rollout(self) -> None:
        """Forget the steps recorded since the last :meth:`finish_rollout` (a rollout cut short);
        the running episodes keep their steps."""
        self._rollout = []

    def drain(self) -> list[Trajectory]:
        """The trajectories finished since the last call."""
        finished, self.finished = self.finished, []
        return finished


class BatchedLoopCallback(RLAnythingCallback):
    """The closed loop's callback for :class:`agents.batched_ppo.BatchedPPO`: at each rollout's
    end the PRM trains on its finished trajectories (modes ``reward``, ``env``, ``rm-only``) and
    the loop's metrics are logged, as :class:`~agents.loop_runtime.RLAnythingCallback` does for
    SB3; the trainer has already added the process rewards.

    With ``beside_update`` (the default) the PRM's diagnostics and training run in a worker
    thread while the policy updates on the same rollout (:meth:`BatchedPPO.beside_update`): the
    two touch different models and the rollout's votes are already drawn, so the results are
    those of running them one after the other, and the row is logged before the iteration's
    log is written.
    """

    def __init__(
        self, feedback: FeedbackVectorWrapper, trainer: PRMTrainer | None,
        curriculum: Curriculum | None = None, *, prm_epochs: int = 1, prm_replay: int = 1,
        beside_update: bool = True,
    ) -> None:  # fmt: skip
        super().__init__(
            feedback,  # type: ignore[arg-type]  # the same attributes, on a Gymnasium vector wrapper
            trainer, curriculum, prm_epochs=prm_epochs, prm_replay=prm_replay,
        )  # fmt: skip
        if not isinstance(beside_update, bool):
            raise TypeError(f"beside_update must be a bool, got {beside_update!r}")
        self.beside_update = beside_update

    def _on_rollout_end(self) -> None:
        trajectories = self.reward_env.drain()
        beside = getattr(self.model, "beside_update", None)
        if not self.beside_update or beside is None:
            self._record_rollout(trajectories)
            return
        beside(lambda: self._rollout_row(trajectories), self._log_row)
