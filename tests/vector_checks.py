"""Checks every vector-env test shares: two vector envs reset and stepped alike give the same.

"The same" is strict: equal values of one type and dtype, every info key with the same flags,
and with SAME_STEP autoreset the finished sub-envs' last observations and infos. The test
modules compare a family's array-state env (or the lean loop) with the lean loop (or
Gymnasium's SyncVectorEnv), driven by :func:`oracle_led_actions`; the procedures every family
runs (:func:`step_alike_at_every_difficulty`, :func:`check_resets_and_tasks_alike`,
:func:`check_shared_tasks_generated_once`) live here once, each test module keeping its counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rla_gym.core import Task
from rla_gym.vector import RLAVectorEnv
from rla_gym.vector_arrays import ArrayVectorEnv

#: Picks one command per sub-env from the oracle's commands, the admissible ones and an rng.
ActionPicker = Callable[[np.ndarray, np.ndarray, np.random.Generator], np.ndarray]
#: The (autoreset, obs_mode) pairs a family's array-state env is checked in against the lean loop.
AUTORESET_AND_OBS_MODES = [
    (AutoresetMode.NEXT_STEP, "dict"),
    (AutoresetMode.SAME_STEP, "dict"),
    (AutoresetMode.NEXT_STEP, "flat"),
    (AutoresetMode.DISABLED, "dict"),
]
#: SAME_STEP's info keys whose values are compared apart (their flags with the rest).
FINAL_KEYS = ("final_obs", "final_info")


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type and dtype, through dicts, lists, tuples and object arrays."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) or (isinstance(a, np.ndarray) and a.dtype == object):
        return (
            type(a) is type(b)
            and getattr(a, "dtype", None) == getattr(b, "dtype", None)
            and len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b, strict=True))
        )
    return (
        type(a) is type(b)
        and bool(np.array_equal(a, b))
        and getattr(a, "dtype", None) == getattr(b, "dtype", None)
    )


def same_info(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Every key and its flags alike; every flagged value equal, in arrays of one dtype.

    The values of :data:`FINAL_KEYS` are the caller's to compare (:func:`step_both` does)."""
    assert ours.keys() == theirs.keys(), sorted(ours.keys() ^ theirs.keys())
    for key in (k for k in theirs if not k.startswith("_")):
        assert same(ours["_" + key], theirs["_" + key]), key
        if key in FINAL_KEYS:
            continue
        assert ours[key].dtype == theirs[key].dtype, key
        for i in np.flatnonzero(theirs["_" + key]):
            assert same(ours[key][i], theirs[key][i]), (key, i, ours[key][i], theirs[key][i])


def reset_both(ours: Any, theirs: Any, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
    """Reset both envs with ``kwargs`` and assert the same outcome; ``theirs``'s obs and info."""
    obs_a, info_a = ours.reset(**kwargs)
    obs_b, info_b = theirs.reset(**kwargs)
    assert same(obs_a, obs_b)
    same_info(info_a, info_b)
    return obs_b, info_b


def step_both(ours: Any, theirs: Any, actions: np.ndarray) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
    """Step both envs with ``actions`` and assert the same outcome, the finished sub-envs' last
    observations and infos (SAME_STEP's ``final_obs``, ``final_info``) too; ``theirs``'s step."""
    obs_a, r_a, term_a, trunc_a, info_a = ours.step(actions)
    step = obs_b, r_b, term_b, trunc_b, info_b = theirs.step(actions)
    assert same(obs_a, obs_b) and same(r_a, r_b)
    assert same(term_a, term_b) and same(trunc_a, trunc_b)
    same_info(info_a, info_b)
    if "final_obs" in info_b:
        assert np.array_equal(info_b["_final_obs"], term_b | trunc_b)
        for i in np.flatnonzero(info_b["_final_obs"]):
            assert same(info_a["final_obs"][i], info_b["final_obs"][i]), i
        same_info(info_a["final_info"], info_b["final_info"])
    return step


def array_and_lean(
    env_id: str, num_envs: int, array_cls: type = ArrayVectorEnv, **kwargs: Any
) -> tuple[Any, RLAVectorEnv]:
    """``make_vec`` with ``array_state`` True and False: the family's ``array_cls`` and the lean loop."""
    ours = gym.make_vec(env_id, num_envs=num_envs, array_state=True, **kwargs)
    theirs = gym.make_vec(env_id, num_envs=num_envs, array_state=False, **kwargs)
    assert isinstance(ours, array_cls) and type(theirs) is RLAVectorEnv
    return ours, theirs


def oracle_led_actions(
    oracles: np.ndarray,
    masks: np.ndarray,
    rng: np.random.Generator,
    oracle_up_to: float = 0.7,
    admissible_up_to: float = 0.95,
) -> np.ndarray:
    """Mostly the oracle's commands (so hard tasks finish too), some admissible, some any.

    Per sub-env a uniform draw below ``oracle_up_to`` picks one of the oracle's commands (where it
    has one), below ``admissible_up_to`` an admissible one, else any (often inadmissible: a
    flagged no-op)."""
    actions = []
    for oracle, admissible in zip(oracles, masks, strict=True):
        u = rng.random()
        if u < oracle_up_to and oracle.any():
            actions.append(rng.choice(np.flatnonzero(oracle)))
        elif u < admissible_up_to:
            actions.append(rng.choice(np.flatnonzero(admissible)))
        else:
            actions.append(rng.integers(len(admissible)))
    return np.array(actions, dtype=np.int64)


def _masks(obs: Any, n_actions: int) -> np.ndarray:
    """The admissible commands in a dict or flat observation (the flat one ends with them)."""
    return obs["action_mask"] if isinstance(obs, dict) else obs[:, -n_actions:].astype(np.int8)


def step_alike_at_every_difficulty(
    ours: Any, theirs: Any, steps: int, actions: ActionPicker = oracle_led_actions
) -> Iterator[tuple[Any, dict[str, Any], np.ndarray]]:
    """Spread the sub-envs over difficulties 0 to 1, reset both envs (seed 11) and step them
    ``steps`` times alike, asserting the same outcome; under DISABLED autoreset restart the
    finished sub-envs by hand every fifth step, asserting they stay finished and unreported
    until then. Yields the lean loop's obs and info, and the outcomes of the episodes that ended."""
    n, n_actions = theirs.num_envs, theirs.single_action_space.n
    levels = np.round(np.linspace(0.0, 1.0, n), 3)
    ours.set_difficulties(levels)
    theirs.set_difficulties(levels)
    obs, info = reset_both(ours, theirs, seed=11)
    rng = np.random.default_rng(0)
    disabled = theirs.autoreset_mode == AutoresetMode.DISABLED
    finished = np.zeros(n, dtype=bool)
    for t in range(steps):
        if disabled and t % 5 == 4 and finished.any():
            obs, info = reset_both(ours, theirs, options={"reset_mask": finished.copy()})
            finished[:] = False
        obs, _, term, trunc, info = step_both(
            ours, theirs, actions(info["oracle_mask"], _masks(obs, n_actions), rng)
        )
        done = term | trunc
        if disabled:  # finished sub-envs stay finished, unreported
            assert not (finished & done).any() and not info["_distance"][finished].any()
            finished |= done
        last = info.get("final_info", info)  # SAME_STEP reports the last step there
        yield obs, info, last["outcome"][done]


def check_resets_and_tasks_alike(ours: Any, theirs: Any, env_id: str, actions: ActionPicker) -> None:
    """Seeded, optioned and partial resets, with per-sub-env tasks, pinned tasks and difficulties
    set between them, and 30 steps after each: the same outcomes (NEXT_STEP autoreset)."""
    assert theirs.autoreset_mode == AutoresetMode.NEXT_STEP
    n = theirs.num_envs
    tasks = [Task(env_id, d, 500 + k) for k, d in enumerate(np.linspace(0, 1, n))]
    rng = np.random.default_rng(3)
    oracle = np.zeros((n, theirs.single_action_space.n), dtype=np.int8)

    def masks_of(obs: Any, info: dict[str, Any]) -> np.ndarray:
        """Every sub-env's admissible commands; keep the oracle's where reported."""
        reported = info["_oracle_mask"]
        oracle[reported] = info["oracle_mask"][reported]  # the others keep their last oracle
        return obs["action_mask"]

    masks = masks_of(*reset_both(ours, theirs, seed=list(range(40, 40 + n))))
    masks = masks_of(*reset_both(ours, theirs, seed=5, options={"difficulty": 0.8}))
    for round_ in range(6):
        if round_ == 1:
            ours.set_tasks(tasks[:5] + [None] * (n - 5))
            theirs.set_tasks(tasks[:5] + [None] * (n - 5))
        if round_ == 2:
            ours.set_attr("pinned_task", tasks)
            theirs.set_attr("pinned_task", tasks)
        if round_ == 3:
            ours.set_difficulties(np.linspace(1, 0, n))
            theirs.set_difficulties(np.linspace(1, 0, n))
        if round_ == 4:
            task = Task(env_id, 0.95, 77)
            picked = np.arange(n) % 3 == 0
            masks = masks_of(*reset_both(ours, theirs, options={"reset_mask": picked, "task": task}))
        picked = rng.random(n) < 0.5
        masks = masks_of(*reset_both(ours, theirs, seed=round_, options={"reset_mask": picked}))
        for _ in range(30):
            obs, *_, info = step_both(ours, theirs, actions(oracle, masks, rng))
            masks = masks_of(obs, info)
    assert ours.get_attr("task") == theirs.get_attr("task")
    assert ours.get_attr("pinned_task") == theirs.get_attr("pinned_task")
    assert ours.get_attr("pinned_task")[0] == Task(env_id, 0.95, 77)


def check_shared_tasks_generated_once(
    ours: Any, theirs: Any, env_id: str, steps: int, actions: ActionPicker = oracle_led_actions
) -> None:
    """Eight sub-envs (SAME_STEP autoreset) on three shared tasks and one sampled one: our env
    generates each task once and copies it, and steps as the lean loop does."""
    tasks = [Task(env_id, d, s) for d, s in ((0.1, 5), (0.8, 9), (0.5, 2))]
    pinned = [tasks[0], tasks[1], tasks[0], None, tasks[1], tasks[2], tasks[0], tasks[2]]
    assert ours.num_envs == len(pinned) and ours.autoreset_mode == AutoresetMode.SAME_STEP
    calls = []
    for env in ours.envs:
        generate = env._generate
        env._generate = lambda task, generate=generate: (calls.append(task), generate(task))[1]  # type: ignore[method-assign]
    ours.set_tasks(pinned)
    theirs.set_tasks(pinned)
    obs, info = reset_both(ours, theirs, seed=4)
    assert len(calls) == 4  # three shared tasks and one sampled one
    rng = np.random.default_rng(2)
    for _ in range(steps):
        obs, *_, info = step_both(ours, theirs, actions(info["oracle_mask"], obs["action_mask"], rng))
    assert ours.get_attr("task") == theirs.get_attr("task")
