"""Household's array-state vector env runs exactly what the lean loop (and single envs) run."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from vector_checks import (
    array_and_lean,
    oracle_led_actions,
    reset_both,
    same,
    same_info,
    step_alike_at_every_difficulty,
    step_both,
)

from rla_gym.core import Task
from rla_gym.envs.household import HouseholdEnv
from rla_gym.envs.household.vector import HouseholdVectorEnv
from rla_gym.vector import RLAVectorEnv

ENV_ID = "RLA-Household-v0"


def _pair(n: int, **kwargs: Any) -> tuple[Any, Any]:
    return array_and_lean(ENV_ID, n, HouseholdVectorEnv, **kwargs)


@pytest.mark.parametrize(
    "autoreset", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
)
def test_household_array_state_env_matches_the_lean_loop_at_every_difficulty(
    autoreset: AutoresetMode,
) -> None:
    n = 22  # difficulties 0, 0.048, ..., 1: every family, goal detail, closed containers, two rooms+
    ours, theirs = _pair(n, difficulty=0.5, autoreset_mode=autoreset)
    outcomes: list[int] = []
    invalid = 0
    for _, info, ended in step_alike_at_every_difficulty(ours, theirs, 600):
        invalid += int(info["invalid_action"].sum())
        outcomes += ended.tolist()
    assert outcomes.count(1) >= 800 and outcomes.count(-1) >= 10  # successes and budget cuts
    assert invalid >= 300  # inadmissible commands were no-ops on both sides


def test_oracle_only_runs_reach_the_optimal_length_at_every_difficulty() -> None:
    """Following the oracle alone finishes every task in exactly ``optimal_len`` steps."""
    n = 12
    ours, theirs = _pair(n, difficulty=0.5)
    ours.set_difficulties(np.linspace(0.0, 1.0, n))
    theirs.set_difficulties(np.linspace(0.0, 1.0, n))
    _, info_b = reset_both(ours, theirs, seed=3)
    rng = np.random.default_rng(1)
    steps = np.zeros(n, dtype=np.int64)
    resetting = np.zeros(n, dtype=bool)  # NEXT_STEP: the step after the last one only resets
    finished = 0
    for _ in range(200):
        oracle = info_b["oracle_mask"]
        actions = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in oracle])
        optimal = info_b["optimal_len"].copy()
        _, _, term, trunc, info_b = step_both(ours, theirs, actions)
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
    obs_b, info_b = reset_both(ours, theirs, seed=5)
    assert obs_b.dtype == np.float32 and obs_b.shape == (n, 68 + 39)
    assert info_b["task_seed"][:3].tolist() == [40, 41, 42]
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
            _, fresh = reset_both(ours, theirs, seed=seed, options=options)
            for key in ("action_mask", "oracle_mask"):  # the other sub-envs keep their masks
                info_b[key] = np.where(mask[:, None], fresh[key], info_b[key])
            continue
        actions = oracle_led_actions(info_b["oracle_mask"], info_b["action_mask"], rng)
        *_, info_b = step_both(ours, theirs, actions)
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
        obs_b = step_both(ours, theirs, oracle_led_actions(0 * masks, masks, rng))[0]
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
        assert same(obs_a, obs_b)
        same_info(info_a, info_b)
        finished = np.zeros(n, dtype=bool)
        while not finished.all():
            actions = oracle_led_actions(info_b["oracle_mask"], obs_b["action_mask"], rng)
            obs_b, _, term, trunc, info_b = step_both(ours, theirs, actions)
            finished |= term | trunc
