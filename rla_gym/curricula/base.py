"""The Curriculum strategy interface and the EpisodeResult it learns from."""

from __future__ import annotations

import abc
import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from rla_gym.core import HELDOUT_SEED_START, Task, check_difficulty


def check_positive(value: Any, name: str, *, integer: bool = False) -> Any:
    """Return ``value`` if it is a finite number > 0 (an int if ``integer``), else raise naming it."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} must be a positive {'integer' if integer else 'number'}, got {value!r}")
    number: Any = value
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return int(number) if integer else float(number)


def check_bounds(bounds: Any) -> tuple[float, float]:
    """``bounds`` as (low, high): a pair of difficulties in [0, 1] with ``low < high``, else
    raise naming it."""
    if not isinstance(bounds, (tuple, list, np.ndarray)) or len(bounds) != 2:
        raise TypeError(f"bounds must be a (low, high) pair of difficulties, got {bounds!r}")
    return check_band(bounds[0], bounds[1], ("bounds[0]", "bounds[1]"))


def check_band(low: Any, high: Any, names: tuple[str, str]) -> tuple[float, float]:
    """Both in [0, 1] and ``low < high``, else raise naming the values."""
    low, high = check_difficulty(low, names[0]), check_difficulty(high, names[1])
    if not low < high:
        raise ValueError(f"{names[0]} must be < {names[1]}, got {low!r} >= {high!r}")
    return low, high


@dataclass(frozen=True)
class EpisodeResult:
    """What a curriculum learns from one finished episode.

    ``outcome`` is +1 (success) or -1; ``rm_outcome_prediction`` is a reward model's
    predicted outcome in [-1, 1]; ``rm_votes`` has shape (steps, m); ``value_estimates``
    are the policy's V(s_t) per step and ``rewards`` the per-step rewards (when omitted,
    rewards are taken as sparse: the return on the last step); ``score`` is an external
    per-episode score (for PrioritizedLevelReplay).
    """

    task: Task
    outcome: int
    episode_return: float
    length: int
    rm_outcome_prediction: float | None = None
    rm_votes: np.ndarray | None = None
    value_estimates: np.ndarray | None = None
    rewards: np.ndarray | None = None
    score: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.task, Task):
            raise TypeError(f"task must be an rla_gym.Task, got {self.task!r}")
        if self.outcome not in (1, -1) or isinstance(self.outcome, bool):
            raise ValueError(f"outcome must be +1 or -1, got {self.outcome!r}")
        if not math.isfinite(self.episode_return):
            raise ValueError(f"episode_return must be finite, got {self.episode_return!r}")
        if isinstance(self.length, bool) or not isinstance(self.length, numbers.Integral) or self.length < 0:
            raise ValueError(f"length must be a non-negative integer, got {self.length!r}")
        p = self.rm_outcome_prediction
        if p is not None and not (isinstance(p, numbers.Real) and -1.0 <= p <= 1.0):
            raise ValueError(f"rm_outcome_prediction must be in [-1, 1], got {p!r}")
        for name in ("value_estimates", "rewards"):
            values = getattr(self, name)
            if values is not None and np.ndim(values) != 1:
                raise ValueError(f"{name} must be 1-D (one per step), got shape {np.shape(values)}")
            if values is not None and not np.isfinite(np.asarray(values, dtype=np.float64)).all():
                raise ValueError(f"{name} must be finite, got {values!r}")
        if self.score is not None and not (
            isinstance(self.score, numbers.Real) and math.isfinite(self.score)
        ):
            raise ValueError(f"score must be a finite number, got {self.score!r}")

    @property
    def success(self) -> bool:
        return self.outcome == 1


class Curriculum(abc.ABC):
    """A serialisable strategy that picks tasks and learns from finished episodes.

    Subclasses implement :meth:`next_task`, usually :meth:`_learn` and :meth:`metrics`,
    and list their mutable attributes in ``state_fields`` so that :meth:`state_dict`
    captures them. Curricula know nothing about envs, processes or torch: adapters in
    :mod:`rla_gym.wrappers` and ``agents`` connect them.
    """

    #: Names of the attributes that make up the strategy's mutable state.
    state_fields: ClassVar[tuple[str, ...]] = ()
    #: Those of ``state_fields`` a state may lack (saved before they were added): they keep
    #: their value on load.
    optional_state_fields: ClassVar[tuple[str, ...]] = ()
    #: The strategy's random draws (:meth:`reseed` restarts them).
    rng: np.random.Generator

    def __init__(self, env_id: str, *, seed: int = 0) -> None:
        if not isinstance(env_id, str) or not env_id:
            raise TypeError(f"env_id must be a registered env id, got {env_id!r}")
        self.env_id = env_id
        self.reseed(seed)
        self.episodes = 0

    @abc.abstractmethod
    def next_task(self, slot: int = 0) -> Task:
        """The task that the env in ``slot`` (its index in a vector env) runs next."""

    def next_group(self, slot: int, size: int) -> list[Task]:
        """``size`` rollouts of one task for a group trainer (``agents.grpo``): by default the
        task :meth:`next_task` hands out, ``size`` times; each rollout is reported to :meth:`update`."""
        size = check_positive(size, "size", integer=True)
        return [self.next_task(slot)] * size

    def verdict(self, task: Task) -> bool | None:
        """For a trainer that holds a round back until the curriculum has judged it: False if
        ``task``'s rollouts judged a proposal that was rejected (the paper does not train on
        them), True if accepted, None if there was nothing to judge (the default)."""
        return None

    def reseed(self, seed: int) -> None:
        """Restart the strategy's random draws from ``seed`` (its learned state stays): a
        single-env adapter does it on ``reset(seed=...)``, as Gymnasium seeds an env there."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
        self.rng = np.random.default_rng(int(seed))

    def abandon(self, task: Task) -> None:  # noqa: B027  (a hook, not abstract)
        """``task``, handed out by :meth:`next_task`, will not be reported: an adapter's reset cut
        its episode short (or dropped it before it began). The default forgets it; a strategy
        that waits for every rollout it hands out (learnability's candidates) hands it out again."""

    def trains_on(self, task: Task) -> bool:
        """Whether the learner should train on the episode of ``task``, just handed out by :meth:`next_task`.

        False marks a rollout that only informs the curriculum (robust PLR's new levels,
        learnability's candidate rollouts); adapters ask right after :meth:`next_task`.
        """
        return True

    @property
    def needs_values(self) -> bool:
        """Whether :meth:`update` needs ``EpisodeResult.value_estimates`` (and ``rewards``).

        Adapters that run a value-based learner (``agents.curriculum.CurriculumVecEnv``) then
        hold each finished episode back until the rollout ends and fill both from the
        trainer's rollout buffer.
        """
        return False

    def update(self, result: EpisodeResult) -> None:
        """Learn from one finished episode."""
        if not isinstance(result, EpisodeResult):
            raise TypeError(f"update takes an EpisodeResult, got {result!r}")
        if result.task.env_id != self.env_id:
            raise ValueError(f"result is for {result.task.env_id!r}, this curriculum serves {self.env_id!r}")
        self._learn(result)
        self.episodes += 1  # only once the strategy accepted the result

    def _learn(self, result: EpisodeResult) -> None:  # noqa: B027  (a hook, not abstract)
        """Strategy-specific learning; the default learns nothing."""

    def metrics(self) -> dict[str, float]:
        """Scalars for logging, e.g. under ``curriculum/`` in TensorBoard."""
        return {"episodes": float(self.episodes)}

    def new_task(self, difficulty: float) -> Task:
        """A fresh task at ``difficulty``; seeds never enter the held-out range."""
        return Task(self.env_id, difficulty, int(self.rng.integers(HELDOUT_SEED_START)))

    # ------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state; :meth:`load_state_dict` on a fresh instance resumes exactly."""
        state = {name: _encode(getattr(self, name)) for name in self.state_fields}
        state.update(
            rng=self.rng.bit_generator.state, episodes=self.episodes, kind=type(self).__name__,
            env_id=self.env_id,
        )  # fmt: skip
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (also after a JSON round trip). A state for another
        strategy or env, or one that does not fit this instance's settings, raises a
        ``ValueError`` naming it, and nothing is changed."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict from state_dict(), got {type(state).__name__}")
        if state.get("kind") != type(self).__name__:
            raise ValueError(f"state is for {state.get('kind')!r}, not {type(self).__name__}")
        if state.get("env_id", self.env_id) != self.env_id:  # states from before it hold none
            raise ValueError(f"state is for {state['env_id']!r}, this curriculum serves {self.env_id!r}")
        required = [name for name in self.state_fields if name not in self.optional_state_fields]
        missing = [name for name in (*required, "rng", "episodes") if name not in state]
        if missing:
            raise ValueError(f"state lacks {missing}")
        decoded = {name: _decode(state[name], self.env_id) for name in self.state_fields if name in state}
        self._check_state(decoded)
        rng = np.random.default_rng()
        try:
            rng.bit_generator.state = state["rng"]
        except (TypeError, ValueError, KeyError) as error:
            raise ValueError(f"state's rng is not a numpy generator state: {state['rng']!r}") from error
        for name, value in decoded.items():
            setattr(self, name, value)
        self.rng = rng
        self.episodes = int(state["episodes"])

    def _check_state(self, state: dict[str, Any]) -> None:
        """Raise ``ValueError`` if the decoded ``state`` fields do not fit this instance (its
        sizes, its bounds); the default checks a ``difficulty`` field lies in [0, 1]."""
        if "difficulty" in state:
            try:
                check_difficulty(state["difficulty"])
            except TypeError as error:
                raise ValueError(str(error)) from None


def _encode(value: Any) -> Any:
    if isinstance(value, Task):
        return {"__task__": [value.difficulty, value.seed]}
    if isinstance(value, dict):
        return {"__dict__": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, np.ndarray):
        return {"__array__": value.tolist()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode(value: Any, env_id: str) -> Any:
    if isinstance(value, list):
        return [_decode(v, env_id) for v in value]
    if isinstance(value, dict):
        if "__task__" in value:
            difficulty, seed = value["__task__"]
            return Task(env_id, difficulty, seed)
        if "__array__" in value:
            return np.array(value["__array__"], dtype=np.float64)
        return {_decode(k, env_id): _decode(v, env_id) for k, v in value["__dict__"]}
    return value
