"""Batched vector envs: N sub-envs of one family stepped in one call, infos as arrays.

``gym.make_vec("RLA-TextNav-v0", num_envs=N)`` returns a :class:`RLAVectorEnv` (the ids
register it as their ``vector_entry_point``; ``vectorization_mode="sync"`` still gives
Gymnasium's ``SyncVectorEnv``). It holds the N bare envs, without Gymnasium's per-env wrappers,
drives their state hooks directly (``RLAEnv._advance``), and writes observations and infos
straight into arrays instead of building a dict per sub-env and merging them. Its sub-envs run
exactly the trajectories of single envs given the same tasks and actions (tested for every
family), and ``reset(seed=s)`` seeds sub-env i with s + i, as Gymnasium's vector envs do.
"""

from __future__ import annotations

import functools
import importlib
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rla_gym.core import OBS_MODES, RESET_OPTIONS, RLAEnv, Task, check_difficulty

#: The info keys, present for every sub-env at every step (``rla_gym.core.RLAEnv._info``).
INFO_KEYS = (
    "difficulty", "task_key", "task_seed", "action_mask", "invalid_action", "oracle_mask", "progress",
    "distance", "optimal_len", "step_budget", "is_success", "outcome",
)  # fmt: skip


class RLAVectorEnv(VectorEnv):
    """``num_envs`` sub-envs of ``env_cls`` (an :class:`~rla_gym.core.RLAEnv` family) in one env.

    Keyword arguments are those of ``gym.make`` (``difficulty``, ``obs_mode``), plus
    ``autoreset_mode`` (``NEXT_STEP``, Gymnasium's default; ``SAME_STEP``, where a finished
    sub-env's last observation and info go to ``info["final_obs"]`` / ``info["final_info"]``;
    or ``DISABLED``, where a finished sub-env stays as it is, unstepped and unreported (its
    ``_key`` masks False, its action ignored) until ``reset(options={"reset_mask": ...})``)
    and ``oracle_info`` (False leaves ``oracle_mask`` out of the infos, the costliest key).
    Per-sub-env tasks: ``set_attr("pinned_task", [t0, t1, ...])``, :meth:`set_tasks` or
    :meth:`set_difficulties`, one call for all sub-envs; a change applies at each sub-env's
    next reset, as for a single env.

    Examples:
        >>> import gymnasium as gym, rla_gym
        >>> envs = gym.make_vec("RLA-TextNav-v0", num_envs=3, difficulty=0.2)
        >>> obs, info = envs.reset(seed=0)
        >>> obs["tokens"].shape, info["distance"].shape
        ((3, 69), (3,))
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}  # noqa: RUF012
    envs: list[RLAEnv]
    obs_mode: str
    oracle_info: bool
    _tokens: np.ndarray
    _masks: np.ndarray
    _texts: list[str]
    _autoreset: np.ndarray
    _started: bool
    _keys: tuple[str, ...]

    def __init__(
        self,
        env_cls: type[RLAEnv],
        num_envs: int,
        *,
        difficulty: float = 0.5,
        obs_mode: str = "dict",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        oracle_info: bool = True,
        render_mode: str | None = None,
    ) -> None:
        if not (isinstance(env_cls, type) and issubclass(env_cls, RLAEnv)):
            raise TypeError(f"env_cls must be an rla-gym env class, got {env_cls!r}")
        if isinstance(num_envs, bool) or not isinstance(num_envs, numbers.Integral) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {obs_mode!r}")
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError:
            mode = None
        if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED):
            raise ValueError(
                f"autoreset_mode must be NEXT_STEP, SAME_STEP or DISABLED, got {autoreset_mode!r}"
            )
        if render_mode is not None:
            raise ValueError(f"RLAVectorEnv does not render; render_mode must be None, got {render_mode!r}")
        self.envs = [env_cls(difficulty, obs_mode=obs_mode) for _ in range(int(num_envs))]
        self.num_envs = int(num_envs)
        self.env_cls, self.obs_mode, self.oracle_info = env_cls, obs_mode, bool(oracle_info)
        self._keys = INFO_KEYS if self.oracle_info else tuple(k for k in INFO_KEYS if k != "oracle_mask")
        self.metadata = {**self.metadata, "autoreset_mode": mode}
        self.render_mode = None
        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        n, length, actions = self.num_envs, first.token_length, len(first.action_names)
        self._tokens = np.zeros((n, length), dtype=np.int64)
        self._masks = np.zeros((n, actions), dtype=np.int8)
        self._texts: list[str] = [""] * n
        self._autoreset = np.zeros(n, dtype=bool)
        self._started = False

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """NEXT_STEP, SAME_STEP or DISABLED, as in ``metadata["autoreset_mode"]`` (as ``SyncVectorEnv``)."""
        return AutoresetMode(self.metadata["autoreset_mode"])

    # ------------------------------------------------------------------ tasks
    def set_tasks(self, tasks: Sequence[Task | None]) -> None:
        """Pin one task per sub-env (None unpins) from its next reset on; a bad entry is named
        before any sub-env changes."""
        if not isinstance(tasks, (Sequence, np.ndarray)) or isinstance(tasks, str):
            raise TypeError(f"tasks must be a sequence of one Task (or None) per sub-env, got {tasks!r}")
        tasks = self._per_env(tasks, "tasks")
        env_id = self.envs[0].env_id
        for i, task in enumerate(tasks):
            if task is not None and not isinstance(task, Task):
                raise TypeError(f"tasks[{i}] must be an rla_gym.Task or None, got {task!r}")
            if task is not None and task.env_id != env_id:
                raise ValueError(f"tasks[{i}] is for {task.env_id!r}, not {env_id!r}: {task!r}")
        for env, task in zip(self.envs, tasks, strict=True):
            if task is not env._pinned_task:  # curriculum adapters re-pin every sub-env each step
                env.set_task(task)

    def set_difficulties(self, difficulties: float | Sequence[float] | np.ndarray) -> None:
        """Sample each sub-env's tasks at its difficulty (a scalar: all of them) from its next reset on."""
        if isinstance(difficulties, str):
            raise TypeError(f"difficulties must be a number or one per sub-env, got {difficulties!r}")
        if isinstance(difficulties, np.ndarray) and difficulties.ndim == 0:  # a numpy scalar array
            difficulties = difficulties.item()
        values = (
            difficulties
            if isinstance(difficulties, (Sequence, np.ndarray)) and np.ndim(difficulties) > 0
            else [difficulties] * self.num_envs
        )
        checked = [  # all checked before any sub-env changes
            check_difficulty(value, f"difficulties[{i}]")
            for i, value in enumerate(self._per_env(values, "difficulties"))
        ]
        for env, value in zip(self.envs, checked, strict=True):
            env.set_difficulty(value)

    def _per_env(self, values: Any, name: str) -> list[Any]:
        values = list(values)
        if len(values) != self.num_envs:
            raise ValueError(f"{name} must have one entry per sub-env ({self.num_envs}), got {len(values)}")
        return values

    # -------------------------------------------------------------- gym API
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-env (or those in ``options["reset_mask"]``); seed i is ``seed + i``.

        ``options["difficulty"]`` or ``options["task"]`` go to each reset sub-env, as in
        ``SyncVectorEnv``; other keys are refused, naming them.
        """
        seeds, options, mask = self._reset_args(seed, options)
        info = self._empty_info()
        rows = np.flatnonzero(mask).tolist()
        for i in rows:
            self.envs[i].reset(seed=seeds[i], options=options or None)
        chosen = [self.envs[i] for i in rows]
        self._observe(rows, chosen)
        zeros = np.zeros(len(rows), dtype=np.int64)
        self._fill(info, rows, chosen, zeros.astype(bool), zeros, zeros.astype(bool), zeros)
        self._autoreset[mask] = False
        self._started = True
        return self._observations(), info

    def _reset_args(
        self, seed: int | Sequence[int | None] | None, options: dict[str, Any] | None
    ) -> tuple[list[int | None], dict[str, Any], np.ndarray]:
        """``reset``'s arguments checked: one seed per sub-env, the other options, the reset mask."""
        n = self.num_envs
        if seed is None:
            seeds: list[int | None] = [None] * n
        elif isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            seeds = [int(seed) + i for i in range(n)]
        elif isinstance(seed, (Sequence, np.ndarray)) and not isinstance(seed, str):
            seeds = self._per_env(seed, "seed")
        else:
            raise TypeError(f"seed must be an integer, one per sub-env, or None, got {seed!r}")
        if options is not None and not isinstance(options, dict):
            raise TypeError(f"options must be a dict or None, got {options!r}")
        options = dict(options or {})
        unknown = set(options) - {*RESET_OPTIONS, "reset_mask"}
        if unknown:
            use = "'difficulty', 'task' or 'reset_mask'"
            raise ValueError(f"unknown reset options {sorted(unknown)}; use {use}")
        mask = np.asarray(options.pop("reset_mask", np.ones(n, dtype=bool)))
        if mask.shape != (n,) or mask.dtype != np.bool_:
            raise ValueError(f"options['reset_mask'] must be a bool array of shape ({n},), got {mask!r}")
        if not self._started and not mask.all():  # a sub-env never reset has no episode to step
            raise ValueError("the first reset resets every sub-env: no reset_mask, or an all-True one")
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):  # as VectorEnv.reset
            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
        return seeds, options, mask

    def _check_actions(self, actions: Any) -> np.ndarray:
        """``step``'s actions as an integer array, or an error naming them."""
        if not self._started:
            raise RuntimeError("step() called before reset()")
        acts = np.asarray(actions)
        n_actions = self.single_action_space.n  # type: ignore[attr-defined]
        if acts.shape != (self.num_envs,) or not np.issubdtype(acts.dtype, np.integer):
            raise ValueError(f"actions must be {self.num_envs} integers, got {actions!r}")
        if acts.min() < 0 or acts.max() >= n_actions:
            raise ValueError(f"actions must lie in [0, {n_actions}), got {actions!r}")
        return acts

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        acts = self._check_actions(actions)
        n = self.num_envs
        rewards = np.zeros(n, dtype=np.float64)
        terminated = np.zeros(n, dtype=bool)
        truncated = np.zeros(n, dtype=bool)
        invalid = np.zeros(n, dtype=bool)
        progress = np.zeros(n, dtype=np.int64)
        outcome = np.zeros(n, dtype=np.int64)
        info = self._empty_info()
        same_step = self.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        frozen = self._autoreset.copy() if self.autoreset_mode == AutoresetMode.DISABLED else None
        finals: list[tuple[int, Any, dict[str, Any]]] = []
        for i, env in enumerate(self.envs):
            if self._autoreset[i]:  # NEXT_STEP: this step only resets the sub-env; DISABLED: none
                if frozen is None:
                    env._begin()
                continue
            success, cut, invalid[i], progress[i] = env._advance(int(acts[i]))
            if success or cut:
                rewards[i], terminated[i], truncated[i] = float(success), success, cut
                outcome[i] = 1 if success else -1
                if same_step:  # report the last step under final_*, then start the next episode
                    final_info = self._empty_info(1)
                    self._fill(final_info, [0], [env], invalid[i : i + 1], progress[i : i + 1],
                               terminated[i : i + 1], outcome[i : i + 1])  # fmt: skip
                    finals.append((i, env._observation(), final_info))
                    env._begin()
                    invalid[i], progress[i], outcome[i] = False, 0, 0
        self._observe(slice(None), self.envs)
        self._fill(info, slice(None), self.envs, invalid, progress, outcome == 1, outcome)
        if same_step:
            if finals:
                self._add_finals(info, finals)
        elif frozen is not None:  # finished sub-envs stay as they are, unreported, until reset
            self._autoreset = frozen | terminated | truncated
            for key in self._keys:
                info["_" + key][frozen] = False
        else:
            self._autoreset = terminated | truncated
        return self._observations(), rewards, terminated, truncated, info

    @staticmethod
    def _rows(rows: Any, n: int) -> Any:
        """Row indices of ``rows`` (a slice or a list) in an array of ``n`` rows."""
        return range(n)[rows] if isinstance(rows, slice) else rows

    def _observe(self, rows: Any, envs: list[RLAEnv]) -> None:
        """``envs``' observations into rows ``rows`` of the observation arrays."""
        if not envs:
            return
        self._masks[rows] = [env._mask_list for env in envs]
        if self.obs_mode == "text":
            for row, env in zip(self._rows(rows, self.num_envs), envs, strict=True):
                self._texts[row] = env._text()
        else:
            self._tokens[rows] = [env._tokens() for env in envs]

    def _fill(
        self,
        info: dict[str, Any],
        rows: Any,
        envs: list[RLAEnv],
        invalid: np.ndarray,
        progress: np.ndarray,
        success: np.ndarray,
        outcome: np.ndarray,
    ) -> None:
        """``envs``' infos into rows ``rows`` of the batched ``info``: every key, masks set."""
        if not envs:
            return
        tasks = [env._task for env in envs]
        info["difficulty"][rows] = [task.difficulty for task in tasks]  # type: ignore[union-attr]
        info["task_key"][rows] = [task.key for task in tasks]  # type: ignore[union-attr]
        info["task_seed"][rows] = [task.seed for task in tasks]  # type: ignore[union-attr]
        info["action_mask"][rows] = [env._mask_list for env in envs]
        info["invalid_action"][rows], info["progress"][rows] = invalid, progress
        info["distance"][rows] = [env._last_distance for env in envs]
        info["optimal_len"][rows] = [env._optimal_len for env in envs]
        info["step_budget"][rows] = [env._budget for env in envs]
        info["is_success"][rows], info["outcome"][rows] = success, outcome
        if self.oracle_info:
            oracle = info["oracle_mask"]
            for row, env in zip(self._rows(rows, oracle.shape[0]), envs, strict=True):
                if env._last_distance != 0:  # the goal reached: none (as RLAEnv.oracle_mask)
                    oracle[row, env._oracle_actions()] = 1
        for key in self._keys:
            info["_" + key][rows] = True

    # ------------------------------------------------------------- plumbing
    def _empty_info(self, n: int | None = None) -> dict[str, Any]:
        n = self.num_envs if n is None else n
        actions = self._masks.shape[1]
        info: dict[str, Any] = {
            "difficulty": np.zeros(n, dtype=np.float64), "task_key": np.zeros(n, dtype=np.int64),
            "task_seed": np.zeros(n, dtype=np.int64), "action_mask": np.zeros((n, actions), dtype=np.int8),
            "invalid_action": np.zeros(n, dtype=bool), "oracle_mask": np.zeros((n, actions), dtype=np.int8),
            "progress": np.zeros(n, dtype=np.int64), "distance": np.zeros(n, dtype=np.int64),
            "optimal_len": np.zeros(n, dtype=np.int64), "step_budget": np.zeros(n, dtype=np.int64),
            "is_success": np.zeros(n, dtype=bool), "outcome": np.zeros(n, dtype=np.int64),
        }  # fmt: skip
        info = {key: info[key] for key in self._keys}
        for key in self._keys:
            info["_" + key] = np.zeros(n, dtype=bool)
        return info

    def _observations(self) -> Any:
        if self.obs_mode == "dict":
            return {"tokens": self._tokens.copy(), "action_mask": self._masks.copy()}
        if self.obs_mode == "flat":
            return np.concatenate([self._tokens, self._masks], axis=1).astype(np.float32)
        return tuple(self._texts)

    def _add_finals(self, info: dict[str, Any], finals: list[tuple[int, Any, dict[str, Any]]]) -> None:
        """SAME_STEP: the finished sub-envs' last observations and infos, as Gymnasium nests them."""
        n = self.num_envs
        final_obs = np.full(n, None, dtype=object)
        final_info = self._empty_info()
        for i, obs, single in finals:
            final_obs[i] = obs
            for key, value in single.items():
                final_info[key][i] = value[0]
        info["final_obs"], info["_final_obs"] = final_obs, np.zeros(n, dtype=bool)
        info["final_info"], info["_final_info"] = final_info, np.zeros(n, dtype=bool)
        done = [i for i, _, _ in finals]
        info["_final_obs"][done] = info["_final_info"][done] = True

    def action_masks(self) -> np.ndarray:
        """(num_envs, n_actions) bool: each sub-env's admissible commands."""
        return self._masks.astype(bool)

    # ----------------------------------------------- VectorEnv attribute API
    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every sub-env."""
        return tuple(getattr(env, name) for env in self.envs)

    def set_attr(self, name: str, values: Any) -> None:
        """Set ``name`` on every sub-env: one value each (a list or tuple) or the same for all."""
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if name == "pinned_task":  # the property's setter is set_task: skip the per-env setattr
            self.set_tasks(self._per_env(values, "values"))
            return
        for env, value in zip(self.envs, self._per_env(values, "values"), strict=True):
            setattr(env, name, value)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every sub-env (or read the attribute) and return the results.

        ``action_masks`` answers from the batch (an array-state env's sub-envs hold no state)."""
        if name == "action_masks":
            return tuple(self.action_masks())
        results = []
        for env in self.envs:
            attr = getattr(env, name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(results)

    def close_extras(self, **kwargs: Any) -> None:
        for env in getattr(self, "envs", ()):  # absent when the constructor raised
            env.close()


#: Families whose state can live in arrays: env class -> its array-state vector env (module:class).
ARRAY_VECTOR_ENVS: dict[str, str] = {
    "rla_gym.envs.textnav:TextNavEnv": "rla_gym.envs.textnav_vector:TextNavVectorEnv",
    "rla_gym.envs.household.env:HouseholdEnv": "rla_gym.envs.household.vector:HouseholdVectorEnv",
    "rla_gym.envs.gui.env:GUIEnv": "rla_gym.envs.gui.vector:GUIVectorEnv",
    "rla_gym.envs.gui.env:GUIEnvV1": "rla_gym.envs.gui.vector:GUIVectorEnvV1",
    "rla_gym.envs.reason.env:ReasonEnv": "rla_gym.envs.reason.vector:ReasonVectorEnv",
}


#: From this many sub-envs on, ``make_vec`` picks a family's array-state env by default: below
#: it, numpy's per-call overhead outweighs the per-env Python it saves (measured crossover for
#: TextNav: 48-64 sub-envs). An array-state class may raise it with a ``min_envs`` attribute.
ARRAY_STATE_MIN_ENVS = 64


def make_vector_env(
    env_cls: type[RLAEnv], num_envs: int, *, array_state: bool | None = None, **kwargs: Any
) -> RLAVectorEnv:
    """The batched vector env of ``env_cls``: its array-state env where the family has one (see
    :data:`ARRAY_VECTOR_ENVS`; not for ``obs_mode="text"``), else :class:`RLAVectorEnv`'s lean
    loop. ``array_state`` None (the default) picks the array-state env from
    :data:`ARRAY_STATE_MIN_ENVS` sub-envs on (or its class's ``min_envs``); True or False asks
    for it or for the lean loop. Other keyword arguments go to the env."""
    if array_state is not None and not isinstance(array_state, bool):
        raise TypeError(f"array_state must be True, False or None, got {array_state!r}")
    target = ARRAY_VECTOR_ENVS.get(f"{env_cls.__module__}:{env_cls.__qualname__}")
    if array_state is False or target is None or kwargs.get("obs_mode", "dict") == "text":
        return RLAVectorEnv(env_cls, num_envs, **kwargs)
    module, name = target.split(":")
    array_cls = getattr(importlib.import_module(module), name)
    threshold = getattr(array_cls, "min_envs", ARRAY_STATE_MIN_ENVS)
    if array_state is None and not (isinstance(num_envs, int) and num_envs >= threshold):
        return RLAVectorEnv(env_cls, num_envs, **kwargs)
    return array_cls(num_envs, **kwargs)


def vector_entry_point(env_cls: type[RLAEnv]) -> Any:
    """The ``vector_entry_point`` of ``env_cls``'s id: ``make_vec`` calls it with ``num_envs``
    and the id's keyword arguments. A ``functools.partial``, so env specs stay picklable."""
    return functools.partial(make_vector_env, env_cls)


__all__ = [
    "ARRAY_STATE_MIN_ENVS",
    "ARRAY_VECTOR_ENVS",
    "RLAVectorEnv",
    "make_vector_env",
    "vector_entry_point",
]
