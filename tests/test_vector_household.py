"""Household's array-state vector env runs exactly what the lean loop (and single envs) run."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import rla_gym.vector
from rla_gym.core import Task
from rla_gym.envs.household import HouseholdEnv
from rla_gym.envs.household.vector import HouseholdVectorEnv
from rla_gym.vector import RLAVectorEnv

ENV_ID = "RLA-Household-v0"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return list(a) == list(b)
    return bool(np.array_equal(a, b))


def _same_info(ours: dict[str, Any], theirs: dict[str, Any], skip: tuple[str, ...] = ()) -> None:
    """Every key the lean loop reports, with the same flags and values; none it does not."""
    for key in (k for k in theirs if not k.startswith("_") and k not in skip):
        mask = theirs["_" + key]
        assert np.array_equal(ours["_" + key], mask), key
        for i in np.flatnonzero(mask):
            assert _same(ours[key][i], theirs[key][i]), (key, i, ours[key][i], theirs[key][i])
    for key in (k for k in ours if not k.startswith("_") and k not in theirs and k not in skip):
        assert not ours["_" + key].any(), key


def _oracle_led_actions(oracles: np.ndarray, masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Mostly the oracle's commands (so hard tasks finish too), some admissible, some any."""
    actions = []
    for oracle, admissible in zip(oracles, masks, strict=True):
        u = rng.random()
        if u < 0.7 and oracle.any():
            actions.append(rng.choice(np.flatnonzero(oracle)))
        elif u < 0.95:
            actions.append(rng.choice(np.flatnonzero(admissible)))
        else:
            actions.append(rng.integers(len(admissible)))
    return np.array(actions, dtype=np.int64)


@pytest.fixture(autouse=True)
def _array_state_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """``make_vec(..., array_state=True)`` picks HouseholdVectorEnv (whether or not it is listed yet)."""
    monkeypatch.setitem(
        rla_gym.vector.ARRAY_VECTOR_ENVS,
        "rla_gym.envs.household.env:HouseholdEnv",
        "rla_gym.envs.household.vector:HouseholdVectorEnv",
    )


def _pair(n: int, **kwargs: Any) -> tuple[Any, Any]:
    ours = gym.make_vec(ENV_ID, num_envs=n, array_state=True, **kwargs)
    theirs = gym.make_vec(ENV_ID, num_envs=n, array_state=False, **kwargs)
    assert isinstance(ours, HouseholdVectorEnv) and type(theirs) is RLAVectorEnv
    return ours, theirs


def _same_step(ours: Any, theirs: Any, actions: np.ndarray, same_step: bool) -> tuple[Any, ...]:
    """Step both with ``actions``; assert every output (final_* of SAME_STEP too) is equal."""
    obs_a, r_a, term_a, trunc_a, info_a = ours.step(actions)
    obs_b, r_b, term_b, trunc_b, info_b = theirs.step(actions)
    assert _same(obs_a, obs_b) and np.array_equal(r_a, r_b)
    assert np.array_equal(term_a, term_b) and np.array_equal(trunc_a, trunc_b)
    _same_info(info_a, info_b, skip=("final_obs", "final_info"))
    if same_step:
        assert ("final_obs" in info_a) == ("final_obs" in info_b)
        for i in np.flatnonzero(term_b | trunc_b):
            assert info_a["_final_obs"][i] and _same(info_a["final_obs"][i], info_b["final_obs"][i])
            for key in (k for k in info_b["final_info"] if not k.startswith("_")):
                assert _same(info_a["final_info"][key][i], info_b["final_info"][key][i]), key
    return obs_b, term_b, trunc_b, info_b


@pytest.mark.parametrize(
    "autoreset", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
)
def test_household_array_state_env_matches_the_lean_loop_at_every_difficulty(
    autoreset: AutoresetMode,
) -> None:
    n = 22  # difficulties 0, 0.048, ..., 1: every family, goal detail, closed containers, two rooms+
    same_step = autoreset == AutoresetMode.SAME_STEP
    ours, theirs = _pair(n, difficulty=0.5, autoreset_mode=autoreset)
    levels = np.round(np.linspace(0.0, 1.0, n), 3)
    ours.set_difficulties(levels)
    theirs.set_difficulties(levels)
    obs_a, info_a = ours.reset(seed=11)
    obs_b, info_b = theirs.reset(seed=11)
    assert _same(obs_a, obs_b)
    _same_info(info_a, info_b)
    rng = np.random.default_rng(0)
    outcomes: list[int] = []
    invalid = 0
    finished = np.zeros(n, dtype=bool)
    for t in range(600):
        if autoreset == AutoresetMode.DISABLED and t % 5 == 4 and finished.any():
            options = {"reset_mask": finished.copy()}  # restart the finished ones by hand
            obs_a, info_a = ours.reset(options=options)
            obs_b, info_b = theirs.reset(options=options)
            assert _same(obs_a, obs_b)
            _same_info(info_a, info_b)
            finished[:] = False
        actions = _oracle_led_actions(info_b["oracle_mask"], obs_b["action_mask"], rng)
        obs_b, term, trunc, info_b = _same_step(ours, theirs, actions, same_step)
        if autoreset == AutoresetMode.DISABLED:  # finished sub-envs stay finished, unreported
            assert not (finished & (term | trunc)).any() and not info_b["_distance"][finished].any()
            finished |= term | trunc
        invalid += int(info_b["invalid_action"].sum())
        last = info_b["final_info"] if same_step and (term | trunc).any() else info_b
        outcomes += [int(last["outcome"][i]) for i in np.flatnonzero(term | trunc)]
    assert outcomes.count(1) >= 800 and outcomes.count(-1) >= 10  # successes and budget cuts
    assert invalid >= 300  # inadmissible commands were no-ops on both sides


def test_oracle_only_runs_reach_the_optimal_length_at_every_difficulty() -> None:
    """Following the oracle alone finishes every task in exactly ``optimal_len`` steps."""
    n = 12
    ours, theirs = _pair(n, difficulty=0.5)
    ours.set_difficulties(np.linspace(0.0, 1.0, n))
    theirs.set_difficulties(np.linspace(0.0, 1.0, n))
    _, info_b = theirs.reset(seed=3)
    ours.reset(seed=3)
    rng = np.random.default_rng(1)
    steps = np.zeros(n, dtype=np.int64)
    resetting = np.zeros(n, dtype=bool)  # NEXT_STEP: the step after the last one only resets
    finished = 0
    for _ in range(200):
        oracle = info_b["oracle_mask"]
        actions = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in oracle])
        optimal = info_b["optimal_len"].copy()
        _, term, trunc, info_b = _same_step(ours, theirs, actions, same_step=False)
        steps += ~resetting
        resetting = term | trunc
        assert not trunc.any()
        for i in np.flatnonzero(term):
            assert steps[i] == optimal[i]
            steps[i] = 0
            finished += 1
    assert finished >= 80


def test_partial_reset_seeds_tasks_and_difficulties() -> None:
    n = 6
    ours, theirs = _pair(n, difficulty=0.3, obs_mode="flat")
    tasks = [Task(ENV_ID, d, 40 + k) for k, d in enumerate((0.0, 0.3, 0.55, 0.7, 0.9, 1.0))]
    for env in (ours, theirs):
        env.set_tasks(tasks[:3] + [None] * 3)
    obs_a, info_a = ours.reset(seed=5)
    obs_b, info_b = theirs.reset(seed=5)
    assert obs_a.dtype == np.float32 and obs_a.shape == (n, 68 + 39)
    assert _same(obs_a, obs_b)
    _same_info(info_a, info_b)
    assert info_a["task_seed"][:3].tolist() == [40, 41, 42]
    assert ours.get_attr("task")[4] == theirs.get_attr("task")[4]
    rng = np.random.default_rng(2)
    for t in range(120):
        if t == 30:
            for env in (ours, theirs):
                env.set_difficulties([0.1, 0.2, 0.6, 0.8, 0.95, 1.0])
        if t % 25 == 24:  # reset some sub-envs mid-episode, with and without seeds and options
            mask = rng.random(n) < 0.5
            seed = None if t % 50 == 24 else [int(s) for s in rng.integers(1000, size=n)]
            options = {"reset_mask": mask, **({"difficulty": 0.45} if t == 74 else {})}
            obs_a, info_a = ours.reset(seed=seed, options=options)
            obs_b, fresh = theirs.reset(seed=seed, options=options)
            assert _same(obs_a, obs_b)
            _same_info(info_a, fresh)
            for key in ("action_mask", "oracle_mask"):  # the other sub-envs keep their masks
                info_b[key] = np.where(mask[:, None], fresh[key], info_b[key])
            continue
        actions = _oracle_led_actions(info_b["oracle_mask"], info_b["action_mask"], rng)
        _, _, _, info_b = _same_step(ours, theirs, actions, same_step=False)
    assert ours.get_attr("difficulty") == theirs.get_attr("difficulty")


def test_oracle_info_off_and_bad_input() -> None:
    ours, theirs = _pair(8, difficulty=0.6, oracle_info=False)
    obs, info = ours.reset(seed=0)
    assert "oracle_mask" not in info and info["_distance"].all()
    assert obs["tokens"].shape == (8, 68) and np.array_equal(ours.action_masks(), obs["action_mask"] == 1)
    obs_b = theirs.reset(seed=0)[0]
    rng = np.random.default_rng(5)
    for _ in range(100):  # distances, progress and outcomes without the oracle's commands
        masks = obs_b["action_mask"]
        obs_b = _same_step(ours, theirs, _oracle_led_actions(0 * masks, masks, rng), same_step=False)[0]
    envs = HouseholdVectorEnv(3)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="'text' uses RLAVectorEnv"):
        HouseholdVectorEnv(2, obs_mode="text")
    assert type(gym.make_vec(ENV_ID, 2, array_state=True, obs_mode="text")) is RLAVectorEnv
    with pytest.raises(ValueError, match="actions must lie in"):
        envs.step(np.array([0, 1, 99]))


def test_sub_envs_pinned_to_one_task_generate_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A group of rollouts on one task (DISABLED autoreset, as the group trainer runs it): one
    generation per task and reset, the other rows copied; the same as the lean loop."""
    generated: list[Task] = []
    generate = HouseholdEnv._generate

    def counting(env: HouseholdEnv, task: Task) -> None:
        generated.append(task)
        generate(env, task)

    n, group = 12, 4
    ours, theirs = _pair(n, autoreset_mode=AutoresetMode.DISABLED)
    monkeypatch.setattr(HouseholdEnv, "_generate", counting)
    rng = np.random.default_rng(4)
    for r in range(3):
        tasks = [Task(ENV_ID, 0.3 * r + 0.1 * (i // group), 70 + 10 * r + i // group) for i in range(n)]
        for env in (ours, theirs):
            env.set_tasks(tasks)
        generated.clear()
        obs_a, info_a = ours.reset(seed=r)
        assert generated == tasks[::group]  # one generation per group
        obs_b, info_b = theirs.reset(seed=r)
        assert _same(obs_a, obs_b)
        _same_info(info_a, info_b)
        finished = np.zeros(n, dtype=bool)
        while not finished.all():
            actions = _oracle_led_actions(info_b["oracle_mask"], obs_b["action_mask"], rng)
            obs_b, term, trunc, info_b = _same_step(ours, theirs, actions, same_step=False)
            finished |= term | trunc
