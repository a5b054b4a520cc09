"""Gymnasium vector adapter: one curriculum in the main process, exact task bookkeeping."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from rla_gym.core import Task
from rla_gym.curricula.base import Curriculum
from rla_gym.wrappers.curriculum import (
    RESULT_KEYS,
    check_curriculum_options,
    check_gymnasium_curriculum,
    episode_result,
)


def sub_info(info: dict[str, Any], index: int, keys: tuple[str, ...]) -> dict[str, Any]:
    """The ``keys`` of sub-env ``index``'s info, out of a vector env's batched info."""
    return {k: info[k][index] for k in keys if k in info and info["_" + k][index]}


class CurriculumVectorWrapper(VectorWrapper):
    """Connects a curriculum to a vector env (``SyncVectorEnv``, ``AsyncVectorEnv``, the suite's
    batched envs) under any autoreset mode.

    Autoreset calls ``reset()`` without options, so every sub-env always holds its *next*
    task, pinned through ``set_attr("pinned_task", ...)`` as soon as its current episode
    starts. Whenever an episode starts, the adapter checks that the sub-env runs the task
    assigned to it; each finished episode is reported to the curriculum exactly once.
    ``reset(options={"reset_mask": ...})`` starts the masked sub-envs' next tasks and leaves
    the others running (under ``DISABLED``, that is how finished sub-envs start again); an
    episode a reset cuts short is not reported, and its task goes back to the curriculum
    (:meth:`~rla_gym.curricula.base.Curriculum.abandon`).
    :attr:`training` says, per sub-env, whether the learner should train on its running
    episode (``Curriculum.trains_on``, asked as each task is handed out).

    Examples:
        >>> import gymnasium as gym, rla_gym
        >>> from rla_gym.curricula import UniformCurriculum
        >>> envs = CurriculumVectorWrapper(gym.make_vec("RLA-TextNav-v0", num_envs=2),
        ...                                UniformCurriculum("RLA-TextNav-v0", bounds=(0.0, 0.5)))
        >>> obs, info = envs.reset(seed=0)
        >>> bool((info["difficulty"] <= 0.5).all())
        True
    """

    def __init__(self, env: VectorEnv, curriculum: Curriculum) -> None:
        super().__init__(env)
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED):
            raise ValueError(f"autoreset_mode must be NEXT_STEP, SAME_STEP or DISABLED, got {mode!r}")
        check_gymnasium_curriculum(curriculum)
        if not hasattr(env, "set_attr"):
            raise TypeError(
                "CurriculumVectorWrapper pins each sub-env's next task with set_attr: wrap the vector env "
                f"itself (gym.make_vec(...)) or a vector wrapper that keeps set_attr, got {env!r}"
            )
        self.same_step = mode == AutoresetMode.SAME_STEP
        self.disabled = mode == AutoresetMode.DISABLED
        self.curriculum = curriculum
        n = env.num_envs
        self.running: list[Task] = []  # the task of each sub-env's current episode
        self.queued: list[Task] = []  # the task pinned for its next episode
        #: Whether the learner trains on each sub-env's running episode (``Curriculum.trains_on``).
        self.training = np.ones(n, dtype=bool)
        self._training_queued = np.ones(n, dtype=bool)
        self._returns = np.zeros(n)
        self._lengths = np.zeros(n, dtype=np.int64)
        self._restart = np.zeros(n, dtype=bool)  # NEXT_STEP: these sub-envs reset on the next step
        self._ended = np.zeros(n, dtype=bool)  # DISABLED: finished, waiting for a reset

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """The wrapped env's autoreset mode, as TorchRL and others read it."""
        if self.disabled:
            return AutoresetMode.DISABLED
        return AutoresetMode.SAME_STEP if self.same_step else AutoresetMode.NEXT_STEP

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        check_curriculum_options(options)
        n = self.num_envs
        mask = None if options is None else options.get("reset_mask")
        if mask is not None and (np.shape(mask) != (n,) or np.asarray(mask).dtype != np.bool_):
            raise ValueError(f"options['reset_mask'] must be a bool array of shape ({n},), got {mask!r}")
        rows = list(range(n)) if mask is None else np.flatnonzero(mask).tolist()
        first = not self.queued
        if first:  # the running tasks are drawn now
            if len(rows) != n:
                raise ValueError("the first reset of a CurriculumVectorWrapper takes no reset_mask")
            self.running, flags = self._draw(rows)
            self.queued, self.training[:] = list(self.running), flags
            self._pin(self.running)
        obs, info = self.env.reset(seed=seed, options=options)
        if not first:  # the reset sub-envs started the tasks pinned for them
            for k in rows:
                if not (self._ended[k] or self._restart[k]):  # an episode cut short: never reported
                    self.curriculum.abandon(self.running[k])
                self.running[k], self.training[k] = self.queued[k], self._training_queued[k]
        self._check(info, rows)
        tasks, flags = self._draw(rows)
        for k, task, flag in zip(rows, tasks, flags, strict=True):
            self.queued[k], self._training_queued[k] = task, flag
        self._pin(self.queued)
        self._returns[rows] = self._lengths[rows] = 0
        self._restart[rows] = self._ended[rows] = False
        return obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        done = terminated | truncated
        if self.disabled:  # finished sub-envs wait, unstepped, for a reset
            running = ~self._ended
            self._returns[running] += rewards[running]
            self._lengths[running] += 1
            finished = np.flatnonzero(done & running)
            started = np.empty(0, dtype=np.int64)
            self._ended[finished] = True
            final = info
        elif self.same_step:
            self._returns += rewards
            self._lengths += 1
            finished = started = np.flatnonzero(done)
            final = info.get("final_info", {})
        else:
            if self._restart.any():  # those sub-envs only reset in this step: nothing to count
                started = np.flatnonzero(self._restart)
                self._returns[started] = self._lengths[started] = 0
                stepped = ~self._restart
                self._returns[stepped] += rewards[stepped]
                self._lengths[stepped] += 1
                done = done & stepped
            else:
                started = np.empty(0, dtype=np.int64)
                self._returns += rewards
                self._lengths += 1
            finished = np.flatnonzero(done)
            self._restart = done
            final = info
        for i in finished:
            last = sub_info(final, int(i), RESULT_KEYS)
            result = episode_result(self.running[i], last, self._returns[i], self._lengths[i])
            self.curriculum.update(result)
        if self.same_step:
            self._returns[finished] = self._lengths[finished] = 0
        if started.size:
            tasks, flags = self._draw(started.tolist())
            for k, task, flag in zip(started.tolist(), tasks, flags, strict=True):
                self.running[k], self.training[k] = self.queued[k], self._training_queued[k]
                self.queued[k], self._training_queued[k] = task, flag
            self._pin(self.queued)
            self._check(info, started)  # a task can only change when an episode starts
        return obs, rewards, terminated, truncated, info

    def _draw(self, indices: Any) -> tuple[list[Task], list[bool]]:
        """The next task of each sub-env in ``indices``, and whether to train on it (asked as
        it is handed out)."""
        tasks, flags = [], []
        for i in indices:
            task = self.curriculum.next_task(int(i))
            tasks.append(task)
            flags.append(self.curriculum.trains_on(task))
        return tasks, flags

    def _pin(self, tasks: list[Task]) -> None:
        """Pin one task per sub-env; ``set_attr`` reaches each base env (via ``set_wrapper_attr``)."""
        env: Any = self.env
        env.set_attr("pinned_task", list(tasks))

    def _check(self, info: dict[str, Any], indices: Any) -> None:
        ran = info["task_key"]
        for i in indices:
            if ran[i] != self.running[i].key:
                raise RuntimeError(
                    f"sub-env {i} ran task key {ran[i]}, not the assigned {self.running[i]} "
                    f"(key {self.running[i].key})"
                )

    def metrics(self) -> dict[str, float]:
        """The curriculum's metrics, for logging."""
        return self.curriculum.metrics()
