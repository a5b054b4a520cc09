"""Single-env adapters: a curriculum picks each episode's task."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rla_gym.core import RLAEnv, Task, final_outcome
from rla_gym.curricula.base import Curriculum, EpisodeResult, check_bounds
from rla_gym.curricula.rm_balance import RewardModelBalanceCurriculum

#: One step of a trajectory as handed to ``predict_outcome``: (observation, action, next observation).
Step = tuple[Any, Any, Any]
#: The last-step info keys that make up an EpisodeResult.
RESULT_KEYS = ("outcome", "rm_outcome_prediction", "rm_votes")


def episode_result(task: Task, info: Mapping[str, Any], episode_return: float, length: int) -> EpisodeResult:
    """The :class:`EpisodeResult` of a finished episode from its last-step ``info``; an episode
    that a wrapper cut short before the env ended it (an outer ``TimeLimit``: the env says
    ``outcome`` 0, or nothing) did not succeed: outcome -1."""
    prediction = info.get("rm_outcome_prediction")
    votes = info.get("rm_votes")
    return EpisodeResult(
        task=task,
        outcome=final_outcome(info),
        episode_return=float(episode_return),
        length=int(length),
        rm_outcome_prediction=None if prediction is None else float(prediction),
        rm_votes=None if votes is None else np.asarray(votes),
    )


def check_gymnasium_curriculum(curriculum: Any) -> None:
    """A curriculum a Gymnasium adapter can serve: an rla_gym ``Curriculum`` that needs no value
    estimates (a Gymnasium env has no learner's values to give), else raise naming it."""
    if not isinstance(curriculum, Curriculum):
        raise TypeError(f"curriculum must be an rla_gym Curriculum, got {curriculum!r}")
    if curriculum.needs_values:
        raise ValueError(
            f"{type(curriculum).__name__} scores episodes with the learner's value estimates "
            "(needs_values), which a Gymnasium env cannot supply: use agents.curriculum."
            "CurriculumVecEnv under SB3, or a score that needs none"
        )


def check_curriculum_options(options: Mapping[str, Any] | None) -> None:
    """Adapters own the task: reject reset options that would override it."""
    clash = {"task", "difficulty"} & set(options or ())
    if clash:
        raise ValueError(f"reset option(s) {sorted(clash)} conflict with the curriculum, which assigns tasks")


class CurriculumWrapper(gym.Wrapper[Any, Any, Any, Any]):
    """Asks ``curriculum`` for the task at each reset and reports each finished episode.

    At the last step ``info["curriculum"]`` holds the curriculum's metrics. ``reset(seed=s)``
    reseeds the curriculum's draws too (so the same seed gives the same task, and sub-envs
    seeded apart draw apart); :attr:`training` says whether to train on the running episode;
    a reset that cuts an episode short hands its task back (``Curriculum.abandon``).

    Examples:
        >>> import gymnasium as gym, rla_gym
        >>> from rla_gym.curricula import SuccessBandCurriculum
        >>> env = CurriculumWrapper(gym.make("RLA-TextNav-v0"), SuccessBandCurriculum("RLA-TextNav-v0"))
        >>> obs, info = env.reset(seed=0)
        >>> float(info["difficulty"])
        0.0
    """

    def __init__(self, env: gym.Env[Any, Any], curriculum: Curriculum, *, slot: int = 0) -> None:
        super().__init__(env)
        if not isinstance(env.unwrapped, RLAEnv):
            raise TypeError(f"CurriculumWrapper needs an rla_gym env, got {env.unwrapped!r}")
        check_gymnasium_curriculum(curriculum)
        if isinstance(slot, bool) or not isinstance(slot, (int, np.integer)) or slot < 0:
            raise ValueError(f"slot must be an integer >= 0, got {slot!r}")
        if curriculum.env_id != env.unwrapped.env_id:
            raise ValueError(f"curriculum serves {curriculum.env_id!r}, the env is {env.unwrapped.env_id!r}")
        self.curriculum = curriculum
        self.slot = slot
        #: Whether the learner should train on the running episode (``Curriculum.trains_on``:
        #: False for a rollout that only informs the curriculum, e.g. robust PLR's new levels).
        self.training = True
        self._task: Task | None = None
        self._ended = False
        self._return = 0.0
        self._length = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        check_curriculum_options(options)
        if seed is not None:  # the env's seed is the curriculum's too: reset(seed=s) repeats its task
            self.curriculum.reseed(seed)
        if self._task is not None and not self._ended:  # an episode cut short: never reported
            self.curriculum.abandon(self._task)
        task = self.curriculum.next_task(self.slot)
        self.training = self.curriculum.trains_on(task)
        self.env.unwrapped.set_task(task)  # type: ignore[attr-defined]
        obs, info = self.env.reset(seed=seed, options=options)
        if info["task_key"] != task.key:
            raise RuntimeError(
                f"the env ran task key {info['task_key']}, not the assigned {task} (key {task.key})"
            )
        self._task, self._return, self._length, self._ended = task, 0.0, 0, False
        self._begin(obs)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        self._record(action, obs)
        if terminated or truncated:
            assert self._task is not None
            self._ended = True
            self.curriculum.update(self._finish(self._task, info))
            info["curriculum"] = self.curriculum.metrics()
        return obs, float(reward), terminated, truncated, info

    # hooks for subclasses that look at the trajectory
    def _begin(self, obs: Any) -> None:
        pass

    def _record(self, action: Any, obs: Any) -> None:
        pass

    def _finish(self, task: Task, info: dict[str, Any]) -> EpisodeResult:
        return episode_result(task, info, self._return, self._length)


def _writes_outcome_prediction(env: gym.Env[Any, Any]) -> bool:
    """Whether a wrapper in ``env``'s stack declares ``writes_rm_outcome_prediction``."""
    while isinstance(env, gym.Wrapper):
        if getattr(type(env), "writes_rm_outcome_prediction", False):
            return True
        env = env.env
    return False


class AdaptiveDifficultyWrapper(CurriculumWrapper):
    """Retunes difficulty from reward-model error balance (:class:`RewardModelBalanceCurriculum`).

    The RM's predicted outcome in [-1, 1] is read from ``info["rm_outcome_prediction"]``
    at an episode's last step (the reward-model wrapper of ``agents`` puts it there), or
    computed by ``predict_outcome(trajectory)`` when given, where ``trajectory`` is the
    list of (observation, action, next observation) steps.

    It starts at ``start`` if given, else at the wrapped env's difficulty when that lies
    within ``bounds``, else at the lower bound. ``direction="stabilising"`` (default) keeps
    success near 1/2; ``"literal"`` is the diverging rule as first written (see the curriculum).

    Examples:
        >>> import gymnasium as gym, rla_gym
        >>> env = AdaptiveDifficultyWrapper(gym.make("RLA-TextNav-v0", difficulty=0.7), interval=8,
        ...                                 predict_outcome=lambda trajectory: 0.5)
        >>> obs, info = env.reset(seed=0)
        >>> float(info["difficulty"])  # the env's own difficulty, which lies within bounds
        0.7
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        *,
        interval: int = 20,
        step: float = 0.1,
        bounds: tuple[float, float] = (0.1, 1.0),
        balance_threshold: float = 0.8,
        cooldown: int = 1,
        start: float | None = None,
        direction: str = "stabilising",
        predict_outcome: Callable[[Sequence[Step]], float] | None = None,
        seed: int = 0,
    ) -> None:
        base = env.unwrapped
        if not isinstance(base, RLAEnv):
            raise TypeError(f"AdaptiveDifficultyWrapper needs an rla_gym env, got {base!r}")
        if predict_outcome is not None and not callable(predict_outcome):
            raise TypeError(
                f"predict_outcome must be a function of a trajectory or None, got {predict_outcome!r}"
            )
        if predict_outcome is None and not _writes_outcome_prediction(env):
            raise ValueError(
                "AdaptiveDifficultyWrapper needs info['rm_outcome_prediction'] at each episode's last "
                "step: wrap the env with a reward-model wrapper first (agents.integrated_reward."
                "ProcessRewardWrapper, or a wrapper whose class sets writes_rm_outcome_prediction = True) "
                "or pass predict_outcome="
            )
        if start is None:
            low, high = check_bounds(bounds)
            start = base.difficulty if low <= base.difficulty <= high else low
        curriculum = RewardModelBalanceCurriculum(
            base.env_id, start=start, interval=interval, step=step, bounds=bounds,
            balance_threshold=balance_threshold, cooldown=cooldown, direction=direction, seed=seed,
        )  # fmt: skip
        super().__init__(env, curriculum)
        self.predict_outcome = predict_outcome
        self._trajectory: list[Step] = []
        self._obs: Any = None

    def _begin(self, obs: Any) -> None:
        self._trajectory, self._obs = [], obs

    def _record(self, action: Any, obs: Any) -> None:
        if self.predict_outcome is not None:
            self._trajectory.append((self._obs, action, obs))
            self._obs = obs

    def _finish(self, task: Task, info: dict[str, Any]) -> EpisodeResult:
        if self.predict_outcome is not None:
            prediction = self.predict_outcome(self._trajectory)
            if not isinstance(prediction, numbers.Real) or not -1.0 <= prediction <= 1.0:
                raise ValueError(f"predict_outcome must return a number in [-1, 1], got {prediction!r}")
            info["rm_outcome_prediction"] = float(prediction)
        elif "rm_outcome_prediction" not in info:
            raise ValueError(
                "AdaptiveDifficultyWrapper needs info['rm_outcome_prediction'] at the last step "
                "(wrap the env with the reward-model wrapper) or predict_outcome="
            )
        return super()._finish(task, info)
