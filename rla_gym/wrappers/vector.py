"""Gymnasium vector adapter: one curriculum in the main process, exact task bookkeeping."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from rla_gym.core import Task
from rla_gym.curricula.base import Curriculum
from rla_gym.wrappers.curriculum import RESULT_KEYS, check_curriculum_options, episode_result


def sub_info(info: dict[str, Any], index: int, keys: tuple[str, ...]) -> dict[str, Any]:
    """The ``keys`` of sub-env ``index``'s info, out of a vector env's batched info."""
    return {k: info[k][index] for k in keys if k in info and info["_" + k][index]}


class CurriculumVectorWrapper(VectorWrapper):
    """Connects a curriculum to a ``SyncVectorEnv`` or ``AsyncVectorEnv`` (NEXT_STEP or SAME_STEP).

    Autoreset calls ``reset()`` without options, so every sub-env always holds its *next*
    task, pinned through ``set_attr("pinned_task", ...)`` as soon as its current episode
    starts. Whenever an episode starts, the adapter checks that the sub-env runs the task
    assigned to it; each finished episode is reported to the curriculum exactly once.
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
        if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            raise ValueError(f"autoreset_mode must be NEXT_STEP or SAME_STEP, got {mode!r}")
        if not hasattr(env, "set_attr"):
            raise TypeError(
                "CurriculumVectorWrapper pins each sub-env's next task with set_attr: wrap the vector env "
                f"itself (gym.make_vec(...)) or a vector wrapper that keeps set_attr, got {env!r}"
            )
        self.same_step = mode == AutoresetMode.SAME_STEP
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

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """The wrapped env's autoreset mode (NEXT_STEP or SAME_STEP), as TorchRL and others read it."""
        return AutoresetMode.SAME_STEP if self.same_step else AutoresetMode.NEXT_STEP

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        check_curriculum_options(options)
        n = self.num_envs
        self.running, self.training[:] = self._draw(range(n))
        self._pin(self.running)
        obs, info = self.env.reset(seed=seed, options=options)
        self._check(info, range(n))
        self.queued, self._training_queued[:] = self._draw(range(n))
        self._pin(self.queued)
        self._returns[:] = 0
        self._lengths[:] = 0
        self._restart[:] = False
        return obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        done = terminated | truncated
        if self.same_step:
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
