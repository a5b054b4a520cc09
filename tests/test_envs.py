"""The environment contract (DESIGN §3), run on every registered rla-gym id."""

from __future__ import annotations

import itertools
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from conftest import LEVELS, RLA_ENV_IDS
from gymnasium.utils.env_checker import check_env as gym_check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.env_util import make_vec_env

from rla_gym.evaluation import heldout_seeds, oracle_agent, random_agent

#: Every key with its numpy type, the same at reset and at every step (arrays: int8 of n_actions).
CONTRACT_TYPES = {
    "difficulty": np.float64, "task_key": np.int64, "task_seed": np.int64, "action_mask": np.ndarray,
    "invalid_action": np.bool_, "oracle_mask": np.ndarray, "progress": np.int64, "distance": np.int64,
    "optimal_len": np.int64, "step_budget": np.int64, "is_success": np.bool_, "outcome": np.int64,
}  # fmt: skip
CONTRACT_KEYS = set(CONTRACT_TYPES)


def _regular(info: dict, n_actions: int) -> None:
    """The info has exactly the contract's keys, each with its fixed type and shape."""
    assert set(info) == CONTRACT_KEYS, set(info) ^ CONTRACT_KEYS
    for key, kind in CONTRACT_TYPES.items():
        assert type(info[key]) is kind, (key, type(info[key]))
        if kind is np.ndarray:
            assert info[key].dtype == np.int8 and info[key].shape == (n_actions,), key


@pytest.mark.parametrize("obs_mode", ["dict", "flat", "text"])
@pytest.mark.parametrize("difficulty", LEVELS)
def test_gymnasium_check_env(env_id: str, obs_mode: str, difficulty: float) -> None:
    env = gym.make(env_id, difficulty=difficulty, obs_mode=obs_mode)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(env.unwrapped, skip_render_check=False)


@pytest.mark.parametrize("obs_mode", ["dict", "flat"])
@pytest.mark.parametrize("difficulty", LEVELS)
def test_sb3_check_env(env_id: str, obs_mode: str, difficulty: float) -> None:
    env = gym.make(env_id, difficulty=difficulty, obs_mode=obs_mode).unwrapped  # (v0 of the GUI warns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check_env(env, warn=True)


def _rollout(env: gym.Env, seed: int, steps: int) -> list:
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    trace = [(obs, info)]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(random_agent(obs, info, rng))
        trace.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            obs, info = env.reset()
            trace.append((obs, info))
    return trace


@pytest.mark.parametrize("obs_mode", ["dict", "text"])
def test_two_copies_with_one_seed_agree(env_id: str, obs_mode: str) -> None:
    a = _rollout(gym.make(env_id, difficulty=0.6, obs_mode=obs_mode), seed=3, steps=300)
    b = _rollout(gym.make(env_id, difficulty=0.6, obs_mode=obs_mode), seed=3, steps=300)
    c = _rollout(gym.make(env_id, difficulty=0.6, obs_mode=obs_mode), seed=4, steps=300)
    assert gym.utils.env_checker.data_equivalence(a, b, exact=True)
    assert not gym.utils.env_checker.data_equivalence(a, c)


@pytest.mark.parametrize("obs_mode", ["dict", "flat", "text"])
def test_pickled_env_continues_its_episode_identically(env_id: str, obs_mode: str) -> None:
    env = gym.make(env_id, difficulty=0.8, obs_mode=obs_mode)
    obs, info = env.reset(seed=1)
    noop = env.unwrapped.noop_action
    for action in np.flatnonzero(info["oracle_mask"]).tolist()[:1] + [
        noop,
        noop,
    ]:  # mid-episode, some progress made
        obs, _, _, _, info = env.step(action)
    clone = pickle.loads(pickle.dumps(env))
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    info_b = info
    for _ in range(300):  # no reset: the pickled episode itself must continue identically
        a, b = env.step(random_agent(obs, info, rng_a)), clone.step(random_agent(obs, info_b, rng_b))
        assert gym.utils.env_checker.data_equivalence(a, b, exact=True)
        obs, _, terminated, truncated, info = a
        info_b = b[4]
        if terminated or truncated:
            obs, info = env.reset(seed=2)
            assert gym.utils.env_checker.data_equivalence((obs, info), clone.reset(seed=2), exact=True)
            info_b = info


def test_info_contract(env_id: str) -> None:
    env = gym.make(env_id, difficulty=0.5)
    obs, info = env.reset(seed=0)
    n_actions = env.action_space.n
    _regular(info, n_actions)
    assert info["task_key"] == env.unwrapped.task.key and info["task_seed"] == env.unwrapped.task.seed
    assert info["action_mask"].dtype == np.int8 and info["action_mask"].any()
    assert np.array_equal(info["action_mask"], obs["action_mask"])
    assert np.array_equal(env.unwrapped.action_masks(), info["action_mask"].astype(bool))
    assert info["distance"] == info["optimal_len"]
    rng = np.random.default_rng(0)
    for _ in range(2000):
        before = info["distance"]
        obs, reward, terminated, truncated, info = env.step(random_agent(obs, info, rng))
        _regular(info, n_actions)
        assert info["progress"] == np.sign(before - info["distance"])
        assert (info["distance"] == 0) == bool(terminated)
        assert info["difficulty"] == 0.5
        assert type(terminated) is bool and type(truncated) is bool
        if terminated or truncated:
            assert info["outcome"] == (1 if info["is_success"] else -1)
            assert reward == (1.0 if info["is_success"] else 0.0)
            obs, info = env.reset()
        else:
            assert not info["is_success"] and info["outcome"] == 0 and reward == 0.0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_runs_1000_steps(env_id: str, mode: str) -> None:
    envs = gym.make_vec(env_id, num_envs=4, vectorization_mode=mode, difficulty=0.3)
    try:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        finished = 0
        for _ in range(1000):
            _, _, terminated, truncated, info = envs.step(envs.action_space.sample())
            finished += int(np.sum(terminated | truncated))
            assert np.all(info["difficulty"] == 0.3)
        assert finished > 0
    finally:
        envs.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_set_difficulty_through_vector_call_applies_at_next_reset(env_id: str, mode: str) -> None:
    envs = gym.make_vec(env_id, num_envs=2, vectorization_mode=mode, difficulty=0.1)
    _, info = envs.reset(seed=0)
    envs.call("set_difficulty", 0.9)
    assert envs.get_attr("difficulty") == (0.9, 0.9)
    # the running episodes keep their difficulty until they end...
    _, _, terminated, truncated, info = envs.step(np.zeros(2, dtype=np.int64))
    assert np.all(info["difficulty"][~(terminated | truncated)] == 0.1)
    # ...and the next automatic reset uses the new one
    restarted = np.zeros(2, dtype=bool)
    for _ in range(200):
        done = terminated | truncated
        # the no-op command until the budget ends
        _, _, terminated, truncated, info = envs.step(np.full(2, envs.get_attr("noop_action")[0]))
        restarted |= done
        assert np.all(info["difficulty"][done] == 0.9)
    assert restarted.all()
    # ...as does an explicit one
    _, info = envs.reset()
    assert np.all(info["difficulty"] == 0.9)
    envs.close()


def test_set_difficulty_through_sb3_env_method(env_id: str) -> None:
    venv = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs={"difficulty": 0.1})
    venv.reset()
    venv.env_method("set_difficulty", 0.7, indices=[1])
    assert venv.get_attr("difficulty") == [0.1, 0.7]
    seen = {0: set(), 1: set()}
    for _ in range(400):  # episodes end and SB3 autoresets them without options
        _, _, _, infos = venv.step(np.array([venv.action_space.sample() for _ in range(2)]))
        for i, info in enumerate(infos):
            seen[i].add(info["difficulty"])
    assert seen[0] == {0.1} and seen[1] == {0.1, 0.7}


@pytest.mark.parametrize("difficulty", LEVELS)
def test_following_the_oracle_succeeds_in_optimal_len_steps(env_id: str, difficulty: float) -> None:
    env = gym.make(env_id)
    rng = np.random.default_rng(0)
    for task_seed in heldout_seeds(200):
        obs, info = env.reset(options={"task": env.unwrapped.make_task(difficulty, task_seed)})
        optimal, steps, done = info["optimal_len"], 0, False
        while not done:
            obs, _, terminated, truncated, info = env.step(oracle_agent(obs, info, rng))
            assert info["progress"] == 1
            steps += 1
            done = terminated or truncated
        assert info["is_success"] and steps == optimal, (task_seed, steps, optimal)


def test_harder_means_longer_solutions_and_lower_random_success(env_id: str) -> None:
    env = gym.make(env_id)
    rng = np.random.default_rng(0)
    optimal, success = [], []
    for difficulty in LEVELS:
        lengths, wins = [], 0
        for task_seed in heldout_seeds(200):
            obs, info = env.reset(options={"task": env.unwrapped.make_task(difficulty, task_seed)})
            lengths.append(info["optimal_len"])
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(random_agent(obs, info, rng))
                done = terminated or truncated
            wins += info["is_success"]
        optimal.append(np.mean(lengths))
        success.append(wins / 200)
    assert all(a < b for a, b in itertools.pairwise(optimal)), optimal
    assert all(a >= b for a, b in itertools.pairwise(success)) and success[0] > success[-1] + 0.3, success


def test_registry_holds_only_rla_ids_with_no_duplicates() -> None:
    assert RLA_ENV_IDS and len(RLA_ENV_IDS) == len(set(RLA_ENV_IDS))


def test_noop_action_is_always_admissible_and_changes_nothing(env_id: str) -> None:
    env = gym.make(env_id, difficulty=0.7)
    noop = env.unwrapped.noop_action
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    for _ in range(300):
        assert info["action_mask"][noop] == 1
        if rng.random() < 0.3:
            after, _, terminated, truncated, info_after = env.step(noop)
            if not (terminated or truncated):
                assert np.array_equal(after["tokens"], obs["tokens"]) and info_after["progress"] == 0
        else:
            after, _, terminated, truncated, info_after = env.step(random_agent(obs, info, rng))
        obs, info = after, info_after
        if terminated or truncated:
            obs, info = env.reset()


@pytest.mark.parametrize("env_id", RLA_ENV_IDS)
@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    difficulty=st.floats(0.0, 1.0),
    obs_mode=st.sampled_from(["dict", "flat", "text"]),
    picks=st.lists(st.integers(-2, 10**6), min_size=1, max_size=100),
)
def test_any_action_sequence_keeps_the_contract(env_id, seed, difficulty, obs_mode, picks) -> None:
    env = gym.make(env_id, difficulty=difficulty, obs_mode=obs_mode).unwrapped
    n = len(env.action_names)
    obs, info = env.reset(seed=seed)
    assert obs in env.observation_space
    for pick in picks:
        action = pick if pick < 0 else pick % (n + 2)  # in range mostly, a few out of range
        oracle, tokens = np.flatnonzero(info["oracle_mask"]).tolist(), env._tokens()
        if not 0 <= action < n:
            with pytest.raises(ValueError, match=f"got {action}"):
                env.step(action)
            continue
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs in env.observation_space and len(env._tokens()) == env.token_length
        # progress is +1 exactly for the oracle's actions, and a reward model can see it
        assert (info["progress"] == 1) == (action in oracle) or terminated
        if info["progress"] == 1:
            assert env._tokens() != tokens
        if info["invalid_action"] or action == env.noop_action:
            assert info["progress"] == 0 and env._tokens() == tokens
        assert terminated or truncated or np.flatnonzero(info["oracle_mask"]).tolist()
        if terminated or truncated:
            assert info["outcome"] == (1 if terminated else -1)
            obs, info = env.reset()
