"""Stable-Baselines3 adapter: a curriculum driving a DummyVecEnv or SubprocVecEnv."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, unwrap_vec_wrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from rla_gym.core import Task
from rla_gym.curricula.base import Curriculum, EpisodeResult
from rla_gym.wrappers.curriculum import check_curriculum_options, episode_result

#: Steps per env a deferring adapter holds results for before it asks for its rollout end.
MAX_DEFERRED_STEPS = 2**20


class CurriculumVecEnv(VecEnvWrapper):
    """Connects a curriculum (living in the main process) to an SB3 VecEnv.

    SB3 resets a finished sub-env inside the same ``step`` without options, so each
    sub-env always holds its *next* task, set through ``env_method("set_task", ...)`` (never
    ``set_attr``, which only sets the outermost wrapper). Whenever an episode starts, the
    adapter checks that the sub-env runs the task assigned to it; each finished episode is
    reported exactly once. It also records which steps belong to episodes the curriculum
    wants trained on (``Curriculum.trains_on``); :meth:`drain_sample_mask` hands that to
    the trainer (:class:`MaskedSamples`).

    A curriculum that scores episodes with the learner's value estimates
    (``Curriculum.needs_values``: PLR's positive value loss, MaxMC) gets its results at the
    end of each rollout instead, with ``value_estimates`` and ``rewards`` taken from the
    trainer's rollout buffer (:meth:`flush_updates`; an episode that spans rollouts gets all
    its steps). :class:`CurriculumLoggingCallback` and the loop's callback call it.

    Examples:
        >>> import rla_gym
        >>> from stable_baselines3.common.env_util import make_vec_env
        >>> from rla_gym.curricula import FixedCurriculum
        >>> venv = CurriculumVecEnv(make_vec_env("RLA-TextNav-v0", n_envs=2),
        ...                         FixedCurriculum("RLA-TextNav-v0", 0.4))
        >>> obs = venv.reset()
        >>> [task.difficulty for task in venv.running]
        [0.4, 0.4]
    """

    def __init__(self, venv: VecEnv, curriculum: Curriculum, *, defer_updates: bool | None = None) -> None:
        super().__init__(venv)
        if defer_updates is not None and not isinstance(defer_updates, bool):
            raise TypeError(f"defer_updates must be a bool or None, got {defer_updates!r}")
        self.curriculum = curriculum
        #: Hold finished episodes back until :meth:`flush_updates` (default: ``curriculum.needs_values``).
        self.defer_updates = curriculum.needs_values if defer_updates is None else defer_updates
        self._t = 0  # steps since the last rollout end
        self._pending: list[tuple[int, int, EpisodeResult]] = []  # (env, step, result), in step order
        self._start = np.zeros(self.num_envs, dtype=np.int64)  # where each running episode began this rollout
        empty = np.zeros(0)
        self._carry = [(empty, empty) for _ in range(self.num_envs)]  # its values, rewards of past rollouts
        self.running: list[Task] = []
        self.queued: list[Task] = []
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, dtype=np.int64)
        # whether the learner trains on each env's running / queued episode (Curriculum.trains_on)
        self._trains = np.ones(self.num_envs, dtype=bool)
        self._trains_queued = np.ones(self.num_envs, dtype=bool)
        self._mask: list[np.ndarray] = []

    def _draw(self, i: int) -> tuple[Task, bool]:
        """The next task of env ``i``, and whether to train on it (asked as it is handed out)."""
        task = self.curriculum.next_task(i)
        self.venv.env_method("set_task", task, indices=[i])
        return task, self.curriculum.trains_on(task)

    def reset(self) -> VecEnvObs:
        """Reset every sub-env. The first reset draws each one's task; a later one starts the
        tasks already set for the next episodes, and hands the episodes it cuts short (and the
        finished ones still held back for values) back to the curriculum (``abandon``)."""
        first = not self.queued
        if first:
            self.running, trains = map(list, zip(*(self._draw(i) for i in range(self.num_envs)), strict=True))
            self._trains[:] = trains
        obs = self.venv.reset()
        self.reset_infos = self._reset_infos()  # SB3's VecEnvWrapper does not pass them on
        if not first:
            for task in [*self.running, *(result.task for _, _, result in self._pending)]:
                self.curriculum.abandon(task)
            self.running, self._trains[:] = list(self.queued), self._trains_queued
        for i, info in enumerate(self.reset_infos):
            self._check(i, info["task_key"])
        self.queued, queued_trains = map(
            list, zip(*(self._draw(i) for i in range(self.num_envs)), strict=True)
        )
        self._trains_queued[:] = queued_trains
        self._returns[:] = 0
        self._lengths[:] = 0
        self._mask = []
        self._t, self._pending, self._start[:] = 0, [], 0  # a reset abandons the rollout under way
        self._carry = [(np.zeros(0), np.zeros(0)) for _ in range(self.num_envs)]
        return obs

    def _reset_infos(self) -> list[dict[str, Any]]:
        """The base VecEnv's reset infos (SB3's VecEnv wrappers, VecMonitor among them, keep
        their own, empty)."""
        return self.venv.unwrapped.reset_infos

    def set_options(self, options: list[dict[str, Any]] | dict[str, Any] | None = None) -> None:
        """The wrapped VecEnv's ``set_options``, but task options are refused: the curriculum
        assigns every task."""
        for each in options if isinstance(options, list) else [options]:
            check_curriculum_options(each)
        self.venv.set_options(options)

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.reset_infos = self._reset_infos()
        self._mask.append(self._trains.copy())
        self._returns += rewards
        self._lengths += 1
        if self.defer_updates and self._t >= MAX_DEFERRED_STEPS:
            raise RuntimeError(
                f"{self._t} steps without a rollout end: a curriculum that needs value estimates "
                "learns only through flush_updates (CurriculumLoggingCallback calls it)"
            )
        for i in np.flatnonzero(dones):
            result = episode_result(self.running[i], infos[i], self._returns[i], self._lengths[i])
            if self.defer_updates:
                self._pending.append((int(i), self._t, result))
            else:
                self.curriculum.update(result)
            self._returns[i] = self._lengths[i] = 0
            self.running[i], self._trains[i] = self.queued[i], self._trains_queued[i]
            self._check(int(i), self.reset_infos[i]["task_key"])  # the episode SB3 just started
            self.queued[i], self._trains_queued[i] = self._draw(int(i))
        self._t += 1
        return obs, rewards, dones, infos

    def flush_updates(self, values: np.ndarray, rewards: np.ndarray) -> int:
        """End of a rollout: report the held-back episodes with their values and rewards.

        ``values`` and ``rewards`` have shape (steps since the last call, n_envs): V(s_t) and
        the rewards the learner trained on (SB3's ``rollout_buffer.values`` and ``.rewards``).
        Returns the number of episodes reported; without deferral there are none.
        """
        values, rewards = np.asarray(values, dtype=np.float64), np.asarray(rewards, dtype=np.float64)
        expected = (self._t, self.num_envs)
        if values.shape != expected or rewards.shape != expected:
            raise ValueError(
                f"values {values.shape} and rewards {rewards.shape} must have shape {expected} "
                "(steps since the last rollout end, n_envs)"
            )
        for i, t, result in self._pending:
            start = self._start[i]
            past_values, past_rewards = self._carry[i]
            episode_values = np.concatenate([past_values, values[start : t + 1, i]])
            episode_rewards = np.concatenate([past_rewards, rewards[start : t + 1, i]])
            if episode_values.size != result.length:
                raise RuntimeError(
                    f"env {i}: {episode_values.size} values for an episode of {result.length} steps"
                )
            self.curriculum.update(
                dataclasses.replace(result, value_estimates=episode_values, rewards=episode_rewards)
            )
            self._carry[i], self._start[i] = (np.zeros(0), np.zeros(0)), t + 1
        for i in range(self.num_envs):  # the running episodes continue in the next rollout
            past_values, past_rewards = self._carry[i]
            self._carry[i] = (
                np.concatenate([past_values, values[self._start[i] :, i]]),
                np.concatenate([past_rewards, rewards[self._start[i] :, i]]),
            )
        reported = len(self._pending)
        self._t, self._pending, self._start[:] = 0, [], 0
        return reported

    def drain_sample_mask(self) -> np.ndarray:
        """(steps, n_envs): whether each step since the last call belongs to a trained-on episode."""
        mask = np.stack(self._mask) if self._mask else np.ones((0, self.num_envs), dtype=bool)
        self._mask = []
        return mask

    def _check(self, i: int, ran: int) -> None:
        """A task can only change when an episode starts: check each new episode's task (its key)."""
        if ran != self.running[i].key:
            raise RuntimeError(f"sub-env {i} ran task key {ran}, not the assigned {self.running[i]}")

    def metrics(self) -> dict[str, float]:
        return self.curriculum.metrics()


def finish_curriculum_rollout(model: OnPolicyAlgorithm, adapter: CurriculumVecEnv, logger: Logger) -> None:
    """Rollout end: deliver held-back results with the buffer's values, then mask the samples.

    Runs after the buffer's rewards are final (the loop adds its process rewards first). Logs
    ``loop/trained_share``, the share of the rollout's steps the update trains on.
    """
    buffer = model.rollout_buffer
    if adapter.defer_updates:
        adapter.flush_updates(buffer.values, buffer.rewards)
    mask = adapter.drain_sample_mask()
    if mask.shape != buffer.rewards.shape:
        raise RuntimeError(
            f"sample mask of shape {mask.shape} does not match SB3's buffer {buffer.rewards.shape}"
        )
    if isinstance(buffer, MaskedSamples):
        buffer.sample_mask = mask
    elif not mask.all():
        raise RuntimeError(
            "the curriculum masks samples (Curriculum.trains_on), but the rollout buffer is not a "
            "MaskedSamples one: pass rollout_buffer_class=masked_buffer_class(RolloutBuffer)"
        )
    logger.record("loop/trained_share", float(mask.mean()))


class CurriculumLoggingCallback(BaseCallback):
    """Connects a curriculum to an on-policy SB3 algorithm at the end of each rollout.

    If the algorithm's env contains a :class:`CurriculumVecEnv`, it hands that adapter the
    rollout buffer's values (for curricula that score with them) and keeps the steps the
    curriculum does not train on out of the update (:class:`MaskedSamples`). It then records
    the curriculum's metrics under ``curriculum/``.
    """

    def __init__(self, curriculum: Curriculum, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.curriculum = curriculum

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        adapter = unwrap_vec_wrapper(self.training_env, CurriculumVecEnv)
        if isinstance(adapter, CurriculumVecEnv) and isinstance(self.model, OnPolicyAlgorithm):
            finish_curriculum_rollout(self.model, adapter, self.logger)
        for key, value in self.curriculum.metrics().items():
            self.logger.record(f"curriculum/{key}", value)


class MaskedSamples:
    """Rollout-buffer mixin: minibatches hold only the samples whose ``sample_mask`` is True.

    Mixed into SB3's rollout buffers (``rollout_buffer_class``), it lets a curriculum keep
    rollouts out of the policy update: robust PLR's new levels, learnability's candidate
    rollouts. ``sample_mask`` (n_steps, n_envs) is set after the rollout and cleared by
    ``reset``. A rollout with no trained-on step yields one batch with zero advantages and
    returns equal to the old values, so the losses and their gradients are zero. No minibatch
    holds a single sample (a remainder of one joins the batch before it; a rollout with one
    trained-on step counts as one with none): MaskablePPO normalises each minibatch's advantages
    without SB3 PPO's guard, and the standard deviation of one sample is NaN.
    """

    sample_mask: np.ndarray | None = None

    def reset(self) -> None:
        super().reset()  # type: ignore[misc]
        self.sample_mask = None

    def get(self, batch_size: int | None = None) -> Any:
        inner = super().get(batch_size)  # type: ignore[misc]
        if self.sample_mask is None or self.sample_mask.all():
            yield from inner
            return
        next(inner, None)  # SB3 flattens the buffer's arrays lazily, on the first draw
        keep = np.flatnonzero(self.sample_mask.swapaxes(0, 1).reshape(-1))  # SB3's flattened order
        if keep.size <= 1:
            samples = self._get_samples(np.arange(self.sample_mask.size))  # type: ignore[attr-defined]
            yield samples._replace(advantages=samples.advantages * 0, returns=samples.old_values)
            return
        order = keep[np.random.permutation(keep.size)]  # noqa: NPY002  (SB3 shuffles with it too)
        size = max(batch_size or keep.size, 2)
        starts = list(range(0, order.size, size))
        if order.size - starts[-1] == 1 and len(starts) > 1:  # a remainder of one joins the batch before
            starts.pop()
        for start, end in zip(starts, [*starts[1:], order.size], strict=True):
            yield self._get_samples(order[start:end])  # type: ignore[attr-defined]


def masked_buffer_class(base: type) -> type:
    """``base`` (an SB3 rollout buffer class) with :class:`MaskedSamples` mixed in."""
    return type(f"Masked{base.__name__}", (MaskedSamples, base), {})
