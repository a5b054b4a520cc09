"""Stable-Baselines3 adapter: a curriculum driving a DummyVecEnv or SubprocVecEnv."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn

from rla_gym.core import Task
from rla_gym.curricula.base import Curriculum
from rla_gym.wrappers.curriculum import episode_result


class CurriculumVecEnv(VecEnvWrapper):
    """Connects a curriculum (living in the main process) to an SB3 VecEnv.

    SB3 resets a finished sub-env inside the same ``step`` without options, so each
    sub-env always holds its *next* task, set through ``env_method("set_task", ...)`` (never
    ``set_attr``, which only sets the outermost wrapper). Whenever an episode starts, the
    adapter checks that the sub-env runs the task assigned to it; each finished episode is
    reported exactly once. It also records which steps belong to episodes the curriculum
    wants trained on (``Curriculum.trains_on``); :meth:`drain_sample_mask` hands that to
    the trainer (:class:`MaskedSamples`).

    Example:
        >>> import rla_gym
        >>> from stable_baselines3.common.env_util import make_vec_env
        >>> from rla_gym.curricula import FixedCurriculum
        >>> venv = CurriculumVecEnv(make_vec_env("RLA-TextNav-v0", n_envs=2),
        ...                         FixedCurriculum("RLA-TextNav-v0", 0.4))
        >>> obs = venv.reset()
        >>> [task.difficulty for task in venv.running]
        [0.4, 0.4]
    """

    def __init__(self, venv: VecEnv, curriculum: Curriculum) -> None:
        super().__init__(venv)
        self.curriculum = curriculum
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
        self.running, trains = map(list, zip(*(self._draw(i) for i in range(self.num_envs)), strict=True))
        obs = self.venv.reset()
        self.reset_infos = self.venv.reset_infos  # SB3's VecEnvWrapper does not pass them on
        for i, info in enumerate(self.venv.reset_infos):
            self._check(i, info["task_id"])
        self.queued, queued_trains = map(
            list, zip(*(self._draw(i) for i in range(self.num_envs)), strict=True)
        )
        self._trains[:], self._trains_queued[:] = trains, queued_trains
        self._returns[:] = 0
        self._lengths[:] = 0
        self._mask = []
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.reset_infos = self.venv.reset_infos
        self._mask.append(self._trains.copy())
        self._returns += rewards
        self._lengths += 1
        for i in np.flatnonzero(dones):
            self.curriculum.update(
                episode_result(self.running[i], infos[i], self._returns[i], self._lengths[i])
            )
            self._returns[i] = self._lengths[i] = 0
            self.running[i], self._trains[i] = self.queued[i], self._trains_queued[i]
            self._check(int(i), self.venv.reset_infos[i]["task_id"])  # the episode SB3 just started
            self.queued[i], self._trains_queued[i] = self._draw(int(i))
        return obs, rewards, dones, infos

    def drain_sample_mask(self) -> np.ndarray:
        """(steps, n_envs): whether each step since the last call belongs to a trained-on episode."""
        mask = np.stack(self._mask) if self._mask else np.ones((0, self.num_envs), dtype=bool)
        self._mask = []
        return mask

    def _check(self, i: int, ran: str) -> None:
        """A task can only change when an episode starts: check each new episode's task."""
        if ran != self.running[i].task_id:
            raise RuntimeError(f"sub-env {i} ran task {ran}, not the assigned {self.running[i].task_id}")

    def metrics(self) -> dict[str, float]:
        return self.curriculum.metrics()


class CurriculumLoggingCallback(BaseCallback):
    """Records the curriculum's metrics under ``curriculum/`` at the end of each rollout."""

    def __init__(self, curriculum: Curriculum, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.curriculum = curriculum

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        for key, value in self.curriculum.metrics().items():
            self.logger.record(f"curriculum/{key}", value)


class MaskedSamples:
    """Rollout-buffer mixin: minibatches hold only the samples whose ``sample_mask`` is True.

    Mixed into SB3's rollout buffers (``rollout_buffer_class``), it lets a curriculum keep
    rollouts out of the policy update: robust PLR's new levels, learnability's candidate
    rollouts. ``sample_mask`` (n_steps, n_envs) is set after the rollout and cleared by
    ``reset``. A rollout with no trained-on step yields one batch with zero advantages and
    returns equal to the old values, so the losses and their gradients are zero.
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
        if keep.size == 0:
            samples = self._get_samples(np.arange(self.sample_mask.size))  # type: ignore[attr-defined]
            yield samples._replace(advantages=samples.advantages * 0, returns=samples.old_values)
            return
        order = keep[np.random.permutation(keep.size)]  # noqa: NPY002  (SB3 shuffles with it too)
        size = batch_size or keep.size
        for start in range(0, order.size, size):
            yield self._get_samples(order[start : start + size])  # type: ignore[attr-defined]


def masked_buffer_class(base: type) -> type:
    """``base`` (an SB3 rollout buffer class) with :class:`MaskedSamples` mixed in."""
    return type(f"Masked{base.__name__}", (MaskedSamples, base), {})
