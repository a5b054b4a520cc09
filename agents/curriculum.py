"""Stable-Baselines3 adapter: a curriculum driving a DummyVecEnv or SubprocVecEnv."""

from __future__ import annotations

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
    reported exactly once.

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

    def _assign(self, i: int, task: Task) -> None:
        self.venv.env_method("set_task", task, indices=[i])

    def reset(self) -> VecEnvObs:
        self.running = [self.curriculum.next_task(i) for i in range(self.num_envs)]
        for i, task in enumerate(self.running):
            self._assign(i, task)
        obs = self.venv.reset()
        self.reset_infos = self.venv.reset_infos  # SB3's VecEnvWrapper does not pass them on
        for i, info in enumerate(self.venv.reset_infos):
            self._check(i, info["task_id"])
        self.queued = [self.curriculum.next_task(i) for i in range(self.num_envs)]
        for i, task in enumerate(self.queued):
            self._assign(i, task)
        self._returns[:] = 0
        self._lengths[:] = 0
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.reset_infos = self.venv.reset_infos
        self._returns += rewards
        self._lengths += 1
        for i in np.flatnonzero(dones):
            self.curriculum.update(
                episode_result(self.running[i], infos[i], self._returns[i], self._lengths[i])
            )
            self._returns[i] = self._lengths[i] = 0
            self.running[i] = self.queued[i]
            self._check(int(i), self.venv.reset_infos[i]["task_id"])  # the episode SB3 just started
            self.queued[i] = self.curriculum.next_task(int(i))
            self._assign(int(i), self.queued[i])
        return obs, rewards, dones, infos

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
