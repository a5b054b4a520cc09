"""The base of the array-state vector envs: the batched loop, with each family's state in arrays.

A family's array-state env (TextNav, Household, GUI, Reason) subclasses :class:`ArrayVectorEnv`
and keeps only what is its own: the arrays of its worlds and running state, how a generated
world is read into them, the dynamics, the admissible masks, the tokens and the oracle. The base
runs the Gymnasium API over those hooks (``reset`` with partial resets, ``step`` under every
autoreset mode, the batched infos, SAME_STEP's ``final_obs`` / ``final_info``), holds the
bookkeeping every family shares (steps, budget, optimal length, distance, task and budget knobs
per sub-env, the oracle buffer) and starts episodes: each sub-env's bare env chooses and
generates its task, and sub-envs pinned to the same task generate it once, the others copying
its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from rla_gym.core import RLAEnv, Task
from rla_gym.vector import RLAVectorEnv


class ArrayVectorEnv(RLAVectorEnv):
    """``num_envs`` sub-envs of ``env_cls`` whose state lives in arrays, stepped by the hooks below.

    Takes the arguments of :class:`~rla_gym.vector.RLAVectorEnv`; ``obs_mode`` must be ``"dict"``
    or ``"flat"``. The bare sub-envs in ``envs`` choose and generate each episode's task (so
    ``set_attr("pinned_task", ...)``, ``set_difficulties`` and ``get_attr("task")`` work as for
    the lean loop); the running state is in this object's arrays, not in theirs.

    A family implements (``rows`` and ``active`` are int arrays of sub-env indices; ``None``, where
    allowed, means every row):

    - ``_world``, set in ``__init__``: every per-sub-env array that :meth:`_load` writes, copied
      row for row to sub-envs pinned to the task a row just generated (the task, its difficulty
      and budget knobs are the base's and copied with them).
    - :meth:`_load` ``(rows, envs, tasks)``: read the worlds that ``envs`` just generated for
      ``tasks`` into ``rows``, running state included.
    - :meth:`_after_load` ``(rows)`` (optional): every started row, copies included, after the
      copies: what depends on the row itself.
    - :meth:`_advance` ``(active, actions, invalid) -> success``: apply the commands of the
      ``active`` rows (inadmissible ones are no-ops flagged in ``invalid``), leaving the other
      rows as they are; their success.
    - :meth:`_refresh` ``(rows)``: masks (``_masks``) and tokens (``_tokens``) of ``rows`` from
      the state, and what :meth:`_cost` and :meth:`_oracle_masks` read; a family may refresh
      every row whatever ``rows`` says.
    - :meth:`_cost` ``(rows) -> cost``: the exact oracle distance of the rows' states (after
      :meth:`_refresh`, a function of the state alone); the base sets it to 0 where a step
      succeeds, and a started row's is its optimal length and budget.
    - :meth:`_oracle_masks` ``(rows) -> oracle``: int8 (k, actions), a fresh array: the
      admissible commands that lower the distance by one (after :meth:`_refresh`).

    One step: NEXT_STEP's finished rows start (:meth:`_start`), the others advance,
    :meth:`_refresh` runs over every row, the started rows take their distance, budget and step
    count (:meth:`_begin`), the advanced ones their distance, progress, steps and outcome. Under
    SAME_STEP the finished rows' last observation and info are read (for those rows only) before
    they start again. Under DISABLED finished rows stay as they are, unstepped and unreported,
    until ``reset(options={"reset_mask": ...})``.

    Examples:
        >>> from rla_gym.envs.reason.vector import ReasonVectorEnv
        >>> envs = ReasonVectorEnv(3, difficulty=0.2, autoreset_mode="Disabled")
        >>> isinstance(envs, ArrayVectorEnv), envs.reset(seed=0)[1]["_distance"].tolist()
        (True, [True, True, True])
    """

    _world: tuple[np.ndarray, ...]

    def __init__(self, env_cls: type[RLAEnv], num_envs: int, **kwargs: Any) -> None:
        super().__init__(env_cls, num_envs, **kwargs)
        if self.obs_mode == "text":
            raise ValueError(
                f"{type(self).__name__} serves obs_mode 'dict' or 'flat'; 'text' uses RLAVectorEnv"
            )
        n, i64 = self.num_envs, np.int64
        self._rows_all = np.arange(n)
        self._steps = np.zeros(n, dtype=i64)
        self._budget = np.zeros(n, dtype=i64)
        self._optimal = np.zeros(n, dtype=i64)
        self._distance = np.zeros(n, dtype=i64)
        self._difficulty = np.zeros(n, dtype=np.float64)
        self._task_key = np.zeros(n, dtype=i64)
        self._task_seed = np.zeros(n, dtype=i64)
        self._budget_factor = np.zeros(n, dtype=np.float64)
        self._budget_slack = np.zeros(n, dtype=i64)
        # the oracle buffer as (n, actions), and flat with one more entry that takes the scatters
        # of no command
        self._oracle_flat = np.zeros(n * self._masks.shape[1] + 1, dtype=np.int8)
        self._oracle = self._oracle_flat[:-1].reshape(n, -1)
        self._world = ()

    # ------------------------------------------------------------- the hooks
    def _load(self, rows: np.ndarray, envs: list[Any], tasks: list[Task]) -> None:
        """Read the worlds ``envs`` just generated for ``tasks`` into ``rows`` (running state too)."""
        raise NotImplementedError

    def _after_load(self, rows: np.ndarray) -> None:
        """Every started row, copies included: what depends on the row itself (default: nothing)."""

    def _advance(self, active: np.ndarray, actions: np.ndarray, invalid: np.ndarray) -> np.ndarray:
        """Apply ``actions`` to the ``active`` rows, flag the inadmissible ones; their success."""
        raise NotImplementedError

    def _refresh(self, rows: np.ndarray | None) -> None:
        """Masks and tokens of ``rows`` (None: all) from the state; what the cost and oracle read."""
        raise NotImplementedError

    def _cost(self, rows: np.ndarray) -> np.ndarray:
        """The exact oracle distance of the current state of each of ``rows``."""
        raise NotImplementedError

    def _oracle_masks(self, rows: np.ndarray | None) -> np.ndarray:
        """int8 (k, actions), fresh: the admissible commands of ``rows`` that lower the distance."""
        raise NotImplementedError

    # -------------------------------------------------------------- gym API
    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-env (or those in ``options["reset_mask"]``); seed i is ``seed + i``."""
        seeds, options, mask = self._reset_args(seed, options)
        rows = np.flatnonzero(mask)
        for i in rows.tolist():
            self.envs[i]._seed_and_configure(seeds[i], options or None)
        if rows.size:
            self._start(rows)
            self._refresh(rows)
            self._begin(rows)
        self._autoreset[mask] = False
        self._started = True
        zeros = np.zeros(self.num_envs, dtype=np.int64)
        info = self._array_info(zeros.astype(bool), zeros, zeros)
        if not mask.all():  # only the reset sub-envs report
            for key in self._keys:
                info["_" + key] = mask.copy()
        return self._observations(), info

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        acts = self._check_actions(actions)
        mode = self.autoreset_mode
        frozen = self._autoreset
        starting = None
        if not frozen.any():
            active = self._rows_all
        elif mode == AutoresetMode.DISABLED:  # finished sub-envs stay as they are until reset
            active = np.flatnonzero(~frozen)
        else:  # NEXT_STEP: these sub-envs only start their next episode
            starting, active = np.flatnonzero(frozen), np.flatnonzero(~frozen)
            self._start(starting)
        invalid = np.zeros(self.num_envs, dtype=bool)
        success = self._advance(active, acts[active], invalid)
        self._refresh(None)
        if starting is not None:
            self._begin(starting)
        progress, outcome = self._account(active, success)
        terminated, truncated = outcome == 1, outcome == -1
        rewards = terminated.astype(np.float64)
        finals: dict[str, Any] = {}
        if mode == AutoresetMode.SAME_STEP:
            done = np.flatnonzero(outcome)
            if done.size:  # report the last step under final_*, then start the next episode
                finals = self._finals(done, invalid, progress, outcome)
                self._start(done)
                self._refresh(done)
                self._begin(done)
                invalid[done], progress[done], outcome[done] = False, 0, 0
        else:
            self._autoreset = terminated | truncated
        info = self._array_info(invalid, progress, outcome)
        info.update(finals)
        if mode == AutoresetMode.DISABLED:  # frozen sub-envs stay frozen, unreported
            self._autoreset |= frozen
            for key in self._keys:
                info["_" + key][frozen] = False
        return self._observations(), rewards, terminated, truncated, info

    # ------------------------------------------------------------- episodes
    def _start(self, rows: np.ndarray) -> None:
        """Start the next episode of each sub-env in ``rows``: generate, then read into arrays.

        Sub-envs pinned to the same task (a group of rollouts) generate it once; the others copy
        its rows."""
        first: dict[Task, int] = {}
        fresh: list[int] = []
        sources: list[int] = []
        copies: list[int] = []
        for i in rows.tolist():
            env = self.envs[i]
            pinned = env._pinned_task
            if pinned is not None:
                source = first.get(pinned)
                if source is not None:
                    env._task, env._steps, env._done = pinned, 0, False
                    sources.append(source)
                    copies.append(i)
                    continue
                first[pinned] = i
            fresh.append(i)
        envs = [self.envs[i] for i in fresh]
        tasks = [env._start_task() for env in envs]
        new = np.array(fresh, dtype=np.int64) if copies else rows
        self._load_task(new, envs, tasks)
        self._load(new, envs, tasks)
        if copies:
            task_arrays = (self._difficulty, self._task_key, self._task_seed, self._budget_factor)
            for array in (*self._world, *task_arrays, self._budget_slack):
                array[copies] = array[sources]
        self._after_load(rows)

    def _load_task(self, rows: np.ndarray, envs: list[Any], tasks: list[Task]) -> None:
        """The tasks of fresh ``rows`` and their budget knobs (every family's ``_knobs`` has them)."""
        k = rows.size
        ints = np.fromiter(
            chain.from_iterable(
                (task.key, task.seed, env._knobs.budget_slack) for env, task in zip(envs, tasks, strict=True)
            ),
            dtype=np.int64,
            count=3 * k,
        ).reshape(k, 3)
        reals = np.fromiter(
            chain.from_iterable(
                (task.difficulty, env._knobs.budget_factor) for env, task in zip(envs, tasks, strict=True)
            ),
            dtype=np.float64,
            count=2 * k,
        ).reshape(k, 2)
        self._task_key[rows], self._task_seed[rows], self._budget_slack[rows] = ints.T
        self._difficulty[rows], self._budget_factor[rows] = reals.T

    def _begin(self, rows: np.ndarray) -> None:
        """Step count, distance, optimal length and budget of freshly started (and refreshed) rows
        (:meth:`RLAEnv._step_budget`)."""
        self._steps[rows] = 0
        distance = self._cost(rows)
        self._optimal[rows] = self._distance[rows] = distance
        budget = np.ceil(distance * self._budget_factor[rows]).astype(np.int64)
        self._budget[rows] = budget + self._budget_slack[rows]

    def _account(self, active: np.ndarray, success: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The advanced rows' distance, progress, step count and outcome (1 success, -1 budget
        cut); returns progress and outcome of every row (0 for the others)."""
        n = self.num_envs
        rows = self._index(active)
        distance = np.where(success, 0, self._cost(active))
        progress = np.zeros(n, dtype=np.int64)
        progress[rows] = np.sign(self._distance[rows] - distance)
        self._distance[rows] = distance
        self._steps[rows] += 1
        cut = ~success & (self._steps[rows] >= self._budget[rows])
        outcome = np.zeros(n, dtype=np.int64)
        outcome[rows] = success.astype(np.int64) - cut
        return progress, outcome

    def _index(self, rows: np.ndarray) -> Any:
        """``rows`` as an index: a slice when it holds every row (views instead of gathers)."""
        return slice(None) if rows.size == self.num_envs else rows

    # ---------------------------------------------------- observations, infos
    def _observations(self, rows: np.ndarray | None = None) -> Any:
        """The observations of every sub-env (or of ``rows``), fresh arrays."""
        tokens = self._tokens if rows is None else self._tokens[rows]
        masks = self._masks if rows is None else self._masks[rows]
        if self.obs_mode == "flat":
            return np.concatenate([tokens, masks], axis=1, dtype=np.float32)
        return {"tokens": tokens.astype(np.int64), "action_mask": masks.copy()}

    def _info_rows(
        self, rows: np.ndarray | None, invalid: np.ndarray, progress: np.ndarray, outcome: np.ndarray
    ) -> dict[str, Any]:
        """The info values of every sub-env (or of ``rows``), fresh arrays, keys in order."""
        pick: Any = (lambda values: values.copy()) if rows is None else (lambda values: values[rows])
        info: dict[str, Any] = {
            "difficulty": pick(self._difficulty), "task_key": pick(self._task_key),
            "task_seed": pick(self._task_seed), "action_mask": pick(self._masks),
            "invalid_action": pick(invalid), "progress": pick(progress), "distance": pick(self._distance),
            "optimal_len": pick(self._optimal), "step_budget": pick(self._budget),
            "is_success": pick(outcome) == 1, "outcome": pick(outcome),
        }  # fmt: skip
        if self.oracle_info:
            oracle = self._oracle_masks(rows)
            oracle[info["distance"] == 0] = 0  # the goal reached: no command lowers the distance
            info["oracle_mask"] = oracle
        return {key: info[key] for key in self._keys}

    def _array_info(self, invalid: np.ndarray, progress: np.ndarray, outcome: np.ndarray) -> dict[str, Any]:
        """The batched info of every sub-env from the arrays (masks all set)."""
        info = self._info_rows(None, invalid, progress, outcome)
        for key in self._keys:
            info["_" + key] = np.ones(self.num_envs, dtype=bool)
        return info

    def _finals(
        self, done: np.ndarray, invalid: np.ndarray, progress: np.ndarray, outcome: np.ndarray
    ) -> dict[str, Any]:
        """SAME_STEP: the last observations and infos of the finished rows ``done``, as Gymnasium
        nests them (the other rows empty, as the lean loop leaves them)."""
        n = self.num_envs
        obs = self._observations(done)
        final_obs = np.full(n, None, dtype=object)
        for j, i in enumerate(done.tolist()):
            final_obs[i] = {key: value[j] for key, value in obs.items()} if isinstance(obs, dict) else obs[j]
        final_info, flag = self._empty_info(), np.zeros(n, dtype=bool)
        flag[done] = True
        for key, values in self._info_rows(done, invalid, progress, outcome).items():
            final_info[key][done] = values
            final_info["_" + key][done] = True
        finals = {"final_obs": final_obs, "final_info": final_info}
        return {**finals, "_final_obs": flag, "_final_info": flag.copy()}


__all__ = ["ArrayVectorEnv"]
