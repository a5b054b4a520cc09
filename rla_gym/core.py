"""The RLAEnv base class: difficulty, tasks, the info contract and observation modes.

Every environment of the suite subclasses :class:`RLAEnv` and implements only the
generation, transition, rendering and oracle hooks; the base does the Gymnasium
plumbing (seeding, validation, observation modes, the ``info`` contract).
"""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ObsMode = Literal["dict", "flat", "text"]
OBS_MODES: tuple[str, ...] = ("dict", "flat", "text")
TASK_SEED_LIMIT = 2**31
#: Task seeds in [HELDOUT_SEED_START, TASK_SEED_LIMIT) are never drawn by an unpinned
#: reset: they are reserved for held-out evaluation.
HELDOUT_SEED_START = 2**30


def half_up(x: float) -> int:
    """Round half up (Python's round() goes to even: round(2.5) == 2); the knob tables use it."""
    return math.floor(x + 0.5)


#: The keys ``reset(options=...)`` takes (a vector env also takes ``reset_mask``).
RESET_OPTIONS = ("difficulty", "task")


def check_difficulty(value: Any, name: str = "difficulty") -> float:
    """Return ``value`` as a float in [0, 1], or raise naming the bad value.

    Raises:
        TypeError: ``value`` is ``None``, a bool, or not a real number.
        ValueError: ``value`` is NaN or outside [0, 1].
    """
    if type(value) is float and 0.0 <= value <= 1.0:  # the common case, without the ABC checks
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in [0, 1], got {value!r}")
    result = float(value)
    if math.isnan(result) or not 0.0 <= result <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return result


def normalize_difficulty(value: Any) -> float:
    """:func:`check_difficulty`, rounded to 6 decimals so that 0.7, np.float32(0.7) and
    0.1 + 0.6 name the same task (and -0.0 the task of 0.0)."""
    return round(check_difficulty(value), 6) + 0.0


def final_outcome(info: Mapping[str, Any]) -> int:
    """The method's outcome O of an episode that just ended, from its last ``info``: +1 if it
    succeeded, else -1 (an episode a wrapper cut before the env ended it, an outer
    ``TimeLimit``, has ``outcome`` 0 there, or none: it did not succeed).

    Examples:
        >>> final_outcome({"outcome": 1}), final_outcome({"outcome": 0}), final_outcome({})
        (1, -1, -1)
    """
    return 1 if info.get("outcome") == 1 else -1


def check_task_seed(value: Any) -> int:
    """Return ``value`` as an int in [0, 2**31), or raise naming the bad value."""
    if type(value) is int and 0 <= value < TASK_SEED_LIMIT:  # the common case
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"task seed must be an integer, got {value!r}")
    result = int(value)
    if not 0 <= result < TASK_SEED_LIMIT:
        raise ValueError(f"task seed must be in [0, 2**31), got {value!r}")
    return result


@dataclass(frozen=True)
class Task:
    """One reproducible task: the same (env id, difficulty, seed) gives the same episode.

    Examples:
        >>> Task("RLA-TextNav-v0", 0.5, 7).task_id == Task("RLA-TextNav-v0", 0.5, 7).task_id
        True
    """

    env_id: str
    difficulty: float
    seed: int
    task_id: str = field(init=False, compare=False)
    _key: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.env_id, str) or not self.env_id:
            raise TypeError(f"env_id must be a non-empty string, got {self.env_id!r}")
        object.__setattr__(self, "difficulty", normalize_difficulty(self.difficulty))
        object.__setattr__(self, "seed", check_task_seed(self.seed))
        key = f"{self.env_id}|{self.difficulty!r}|{self.seed}".encode()
        object.__setattr__(self, "task_id", hashlib.blake2b(key, digest_size=8).hexdigest())
        object.__setattr__(self, "_key", int(self.task_id, 16) >> 4)

    def __hash__(self) -> int:
        # equal tasks have equal ids; the key is the same in every process (str hashes are
        # salted per process), so a pickled task hashes alike, and it is computed once
        return self._key

    @property
    def key(self) -> int:
        """``task_id`` as a non-negative int64 (its first 60 bits): ``info["task_key"]``."""
        return self._key


class RLAEnv(gym.Env[Any, np.int64]):
    """Base of every rla-gym environment (see ``docs/contract.md``).

    Subclasses set the class attributes below and implement the hooks
    ``_generate``, ``_apply``, ``_action_mask``, ``_success``, ``_tokens``,
    ``_text``, ``_distance``, ``_oracle_actions`` and ``_step_budget``.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human"], "render_fps": 4}  # noqa: RUF012
    #: Registered id; part of every task's identity.
    env_id: ClassVar[str]
    #: Token vocabulary; id 0 is padding.
    vocab: ClassVar[tuple[str, ...]]
    #: Number of tokens in the ``tokens`` observation.
    token_length: ClassVar[int]
    #: Names of the fixed discrete commands.
    action_names: ClassVar[tuple[str, ...]]
    #: A command that is always admissible and never changes the state ("look", "wait").
    noop_action: ClassVar[int]
    #: Upper bound on the length of the text observation, and its alphabet.
    text_max_length: ClassVar[int]
    text_charset: ClassVar[str]

    def __init__(
        self,
        difficulty: float = 0.5,
        *,
        obs_mode: ObsMode = "dict",
        render_mode: str | None = None,
    ) -> None:
        if obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {obs_mode!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.obs_mode = obs_mode
        self.render_mode = render_mode
        self._difficulty = normalize_difficulty(difficulty)
        self._pinned_task: Task | None = None
        self._task: Task | None = None
        self._mask_list: list[int] = [0] * len(self.action_names)
        self._mask_array: np.ndarray | None = np.zeros(len(self.action_names), dtype=np.int8)
        self._steps = 0
        self._budget = 0
        self._optimal_len = 0
        self._last_distance = 0
        self._done = True
        self.action_space = spaces.Discrete(len(self.action_names))
        self.observation_space = self._make_observation_space()

    # ------------------------------------------------------------------ spaces
    def _make_observation_space(self) -> spaces.Space[Any]:
        n_actions, top = len(self.action_names), len(self.vocab) - 1
        if self.obs_mode == "text":
            return spaces.Text(self.text_max_length, charset=self.text_charset)
        if self.obs_mode == "flat":
            high = np.array([top] * self.token_length + [1] * n_actions, dtype=np.float32)
            return spaces.Box(np.zeros_like(high), high, dtype=np.float32)
        return spaces.Dict(
            {
                "tokens": spaces.Box(0, top, (self.token_length,), dtype=np.int64),
                "action_mask": spaces.MultiBinary(n_actions),
            }
        )

    # ------------------------------------------------------- difficulty & tasks
    @property
    def difficulty(self) -> float:
        """Difficulty used from the next reset on (a pinned task's difficulty if one is set)."""
        return self._pinned_task.difficulty if self._pinned_task else self._difficulty

    @property
    def task(self) -> Task | None:
        """The task of the running episode (``None`` before the first reset)."""
        return self._task

    def set_difficulty(self, difficulty: float) -> None:
        """Sample tasks at ``difficulty`` from the next reset on; unpins any pinned task."""
        self._difficulty = normalize_difficulty(difficulty)
        self._pinned_task = None

    def set_task(self, task: Task | None) -> None:
        """Run ``task`` at every reset from the next one on; ``None`` unpins it."""
        if task is not None and task is self._pinned_task:  # pinned already (adapters re-pin often)
            return
        if task is not None:
            if not isinstance(task, Task):
                raise TypeError(f"task must be an rla_gym.Task or None, got {task!r}")
            if task.env_id != self.env_id:
                raise ValueError(f"task is for {task.env_id!r}, not {self.env_id!r}: {task!r}")
            self._difficulty = task.difficulty
        self._pinned_task = task

    @property
    def pinned_task(self) -> Task | None:
        """The task every reset runs, if pinned; assigning it calls :meth:`set_task`.

        A property so that Gymnasium's ``VectorEnv.set_attr("pinned_task", [t0, t1, ...])``
        gives each sub-env its own task in one call, across processes too.
        """
        return self._pinned_task

    @pinned_task.setter
    def pinned_task(self, task: Task | None) -> None:
        self.set_task(task)

    def make_task(self, difficulty: float, seed: int) -> Task:
        """The task of this environment at ``difficulty`` with task seed ``seed``."""
        return Task(self.env_id, difficulty, seed)

    # -------------------------------------------------------------- gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode on the pinned task or on a fresh task at the current difficulty.

        ``options`` may hold ``difficulty`` (as :meth:`set_difficulty`) or ``task``
        (as :meth:`set_task`); both persist for later resets.
        """
        self._seed_and_configure(seed, options)
        self._begin()
        return self._observation(), self._info(invalid=False, progress=0)

    def _seed_and_configure(self, seed: int | None, options: dict[str, Any] | None) -> None:
        """``reset``'s options, then its seeding, before the task starts (shared with the vector
        envs): options that are refused leave the random state as it was."""
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"options must be a dict or None, got {options!r}")
        if options:
            unknown = set(options) - set(RESET_OPTIONS)
            if unknown:
                raise ValueError(f"unknown reset options {sorted(unknown)}; use 'difficulty' or 'task'")
            if len(options) == 2:
                raise ValueError(f"give either 'task' or 'difficulty' in options, not both: {options!r}")
            if "task" in options:
                self.set_task(options["task"])
            if "difficulty" in options:
                self.set_difficulty(options["difficulty"])
        super().reset(seed=seed)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Apply one command; a masked (inadmissible) command is a no-op flagged in info."""
        if self._done:
            raise RuntimeError("step() called on a finished or unstarted episode; call reset() first")
        success, truncated, invalid, progress = self._advance(self._check_action(action))
        info = self._info(invalid, progress)
        if success or truncated:
            info["is_success"] = np.bool_(success)
            info["outcome"] = np.int64(1 if success else -1)
        return self._observation(), 1.0 if success else 0.0, success, truncated, info

    def _begin(self) -> None:
        """Start an episode on the pinned task or a fresh one (``reset`` without the obs and info)."""
        self._start_task()
        self._optimal_len = self._last_distance = self._distance()
        self._budget = self._step_budget(self._optimal_len)
        self._update_mask()

    def _start_task(self) -> Task:
        """Choose the episode's task (the pinned one, or a fresh one from ``np_random``) and
        generate its world; the batched vector envs call this and read the world into arrays."""
        task = self._pinned_task
        if task is None:
            seed_ = int(self.np_random.integers(HELDOUT_SEED_START))
            task = Task(self.env_id, self._difficulty, seed_)
        self._task = task
        self._generate(task)
        self._steps = 0
        self._done = False
        return task

    def _advance(self, a: int) -> tuple[bool, bool, bool, int]:
        """Apply a checked command: (success, truncated, invalid, progress); ``step`` without
        the obs and info, shared with the batched vector env (``rla_gym.vector``)."""
        invalid = not self._mask_list[a]
        if not invalid:
            self._apply(a)
        self._steps += 1
        success = self._success()
        distance = 0 if success else self._distance()
        delta = self._last_distance - distance
        progress = (delta > 0) - (delta < 0)
        self._last_distance = distance
        truncated = not success and self._steps >= self._budget
        self._update_mask()
        if success or truncated:
            self._done = True
        return success, truncated, invalid, progress

    def action_masks(self) -> np.ndarray:
        """Boolean mask of admissible commands (read by sb3-contrib's MaskablePPO)."""
        if self._task is None:
            raise RuntimeError("action_masks() called before reset()")
        return self._mask.astype(bool)

    def render(self) -> Any:
        """``"ansi"``: return the text observation; ``"human"``: print it; ``"rgb_array"``: a frame."""
        if self._task is None:
            raise RuntimeError("render() called before reset()")
        if self.render_mode == "rgb_array":
            return self._rgb_array()
        if self.render_mode == "ansi":
            return self._text()
        if self.render_mode == "human":
            print(self._text())
        return None

    def _rgb_array(self) -> np.ndarray:
        """The ``render_mode="rgb_array"`` frame; envs whose metadata lists that mode override it."""
        raise NotImplementedError(f"{type(self).__name__} draws no rgb_array frames")

    def decode_tokens(self, tokens: Any) -> list[str]:
        """Map token ids back to words, dropping padding (for debugging)."""
        return [self.vocab[int(t)] for t in np.asarray(tokens).ravel() if int(t) != 0]

    # ---------------------------------------------------------------- plumbing
    def _check_action(self, action: Any) -> int:
        value = action.item() if isinstance(action, (np.ndarray, np.generic)) and action.size == 1 else action
        n = len(self.action_names)
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"action must be an integer in [0, {n}), got {action!r}")
        if not 0 <= value < n:
            raise ValueError(f"action must be in [0, {n}), got {action!r}")
        return value

    def _update_mask(self) -> None:
        self._mask_list = self._action_mask()
        self._mask_array = None  # built when read: the batched vector env reads the list only

    @property
    def _mask(self) -> np.ndarray:
        """The admissible-command mask as an int8 array (built from ``_mask_list`` once per step)."""
        if self._mask_array is None:
            self._mask_array = np.array(self._mask_list, dtype=np.int8)
        return self._mask_array

    def oracle_mask(self) -> np.ndarray:
        """int8 multi-hot of the commands that lower the exact optimal distance by one (none once
        the goal is reached: distance 0)."""
        mask = np.zeros(len(self.action_names), dtype=np.int8)
        if self._last_distance != 0:
            mask[self._oracle_actions()] = 1
        return mask

    def _info(self, invalid: bool, progress: int) -> dict[str, Any]:
        """The info of every step: the same keys with the same numpy types at reset and at every
        step (``is_success`` False and ``outcome`` 0 until the last step sets them), so that
        array-based readers (Gymnasium's vector envs, TorchRL) take it as it is."""
        assert self._task is not None
        return {
            "difficulty": np.float64(self._task.difficulty),
            "task_key": np.int64(self._task.key),
            "task_seed": np.int64(self._task.seed),
            "action_mask": self._mask.copy(),
            "invalid_action": np.bool_(invalid),
            "oracle_mask": self.oracle_mask(),
            "progress": np.int64(progress),
            "distance": np.int64(self._last_distance),
            "optimal_len": np.int64(self._optimal_len),
            "step_budget": np.int64(self._budget),
            "is_success": np.bool_(False),
            "outcome": np.int64(0),
        }

    def _observation(self) -> Any:
        if self.obs_mode == "dict":
            return {"tokens": np.array(self._tokens(), dtype=np.int64), "action_mask": self._mask.copy()}
        if self.obs_mode == "flat":
            return np.array(self._tokens() + self._mask.tolist(), dtype=np.float32)
        return self._text()

    # ------------------------------------------------------------------- hooks
    def _generate(self, task: Task) -> None:
        """Build the world of ``task`` deterministically from its seed and difficulty."""
        raise NotImplementedError

    def _apply(self, action: int) -> None:
        """Apply an admissible command to the state."""
        raise NotImplementedError

    def _action_mask(self) -> list[int]:
        """1 where a command is admissible, else 0 (never all zeros)."""
        raise NotImplementedError

    def _success(self) -> bool:
        """Whether the goal is reached in the current state."""
        raise NotImplementedError

    def _tokens(self) -> list[int]:
        """The token ids of the current observation, exactly ``token_length`` of them."""
        raise NotImplementedError

    def _text(self) -> str:
        """The text observation (goal and what the agent perceives)."""
        raise NotImplementedError

    def _distance(self) -> int:
        """Exact number of commands the oracle needs from the current state."""
        raise NotImplementedError

    def _oracle_actions(self) -> list[int]:
        """All commands that reduce the exact optimal distance by one."""
        raise NotImplementedError

    def _step_budget(self, optimal_len: int) -> int:
        """Steps allowed for the episode, given the optimal solution length: by default
        ceil(optimal_len * budget_factor) + budget_slack from the family's knobs (``self._knobs``)."""
        knobs: Any = getattr(self, "_knobs", None)
        if knobs is None or not hasattr(knobs, "budget_factor") or not hasattr(knobs, "budget_slack"):
            raise NotImplementedError(
                f"{type(self).__name__} needs knobs with a budget, or its own _step_budget"
            )
        return math.ceil(optimal_len * knobs.budget_factor) + knobs.budget_slack
