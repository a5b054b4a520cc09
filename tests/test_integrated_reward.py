"""Integrated feedback: hand-computed values, validation, and the Gymnasium wrapper."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from agents.integrated_reward import (
    ProcessRewardWrapper,
    integrated_rewards,
    integrated_step_rewards,
    integrated_trajectory_reward,
)
from agents.reward_model import ProcessRewardModel
from agents.trajectories import collect_mixture_trajectories
from rla_gym.evaluation import random_agent
from rla_gym.wrappers import AdaptiveDifficultyWrapper


def test_step_form_by_hand() -> None:
    votes = [[1, 1, 1], [1, -1, -1], [-1, -1, -1]]
    assert np.allclose(integrated_step_rewards(1, votes), [2.0, 1 - 1 / 3, 0.0])
    assert np.allclose(integrated_step_rewards(-1, votes, lam=0.5), [-0.5, -1 - 1 / 6, -1.5])
    assert np.allclose(integrated_step_rewards(1, [[1], [-1]], lam=0.0), [1.0, 1.0])


def test_trajectory_form_by_hand() -> None:
    assert integrated_trajectory_reward(-1, [0.5, 0.5]) == -0.9
    assert integrated_trajectory_reward(1, [1.0, -1.0, 1.0], lam=0.3) == pytest.approx(1.1)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: integrated_step_rewards(1, [[1, 1]], lam=-0.1),
            "lam must be a finite number >= 0, got -0.1",
        ),
        (lambda: integrated_step_rewards(1, np.ones((2, 0))), "m must be an integer >= 1, got 0"),
        (lambda: integrated_step_rewards(0, [[1]]), "outcome must be \\+1 or -1, got 0"),
        (lambda: integrated_step_rewards(1, [[0.5]]), "votes must be \\+1 or -1"),
        (
            lambda: integrated_trajectory_reward(1, [1.5]),
            "scores must be a non-empty sequence in \\[-1, 1\\]",
        ),
        (lambda: integrated_trajectory_reward(1, [0.1], lam=float("nan")), "lam must be a finite number"),
    ],
)
def test_bad_arguments(call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_batched_rewards_match_the_per_trajectory_formula() -> None:
    env = gym.make("RLA-TextNav-v0")
    prm = ProcessRewardModel.for_env(env, seed=0, device="cpu")
    trajectories = collect_mixture_trajectories("RLA-TextNav-v0", 0.3, tasks=3, rollouts_per_task=2)
    rewards = integrated_rewards(prm, trajectories, lam=0.5, m=3, generator=torch.Generator().manual_seed(1))
    votes = prm.votes(prm.steps(trajectories), 3, generator=torch.Generator().manual_seed(1)).numpy()
    start = 0
    for t, r in zip(trajectories, rewards, strict=True):
        assert np.allclose(r, integrated_step_rewards(t.outcome, votes[start : start + len(t)], lam=0.5))
        start += len(t)


def test_wrapper_adds_process_reward_and_outcome_prediction() -> None:
    base = gym.make("RLA-TextNav-v0", difficulty=0.2)
    prm = ProcessRewardModel.for_env(base, seed=0, device="cpu")
    env = ProcessRewardWrapper(base, prm, lam=0.5, m=4)
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(random_agent(obs, info, rng))
        done = terminated or truncated
        votes = info["rm_step_votes"]
        outcome = 1.0 if terminated else -1.0 if truncated else 0.0  # O in {+1, -1} at the last step
        assert votes.shape == (4,) and reward == pytest.approx(outcome + 0.5 * votes.mean())
    assert info["rm_votes"].shape[1] == 4
    assert isinstance(info["rm_outcome_prediction"], float)
    with pytest.raises(TypeError, match="needs obs_mode='dict'"):
        ProcessRewardWrapper(gym.make("RLA-TextNav-v0", obs_mode="flat"), prm)


def test_adaptive_difficulty_reads_the_wrappers_predictions() -> None:
    base = gym.make("RLA-TextNav-v0")
    env = AdaptiveDifficultyWrapper(
        ProcessRewardWrapper(base, ProcessRewardModel.for_env(base, seed=0, device="cpu")), interval=3
    )
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    finished = 0
    while finished < 6:
        obs, _, terminated, truncated, info = env.step(random_agent(obs, info, rng))
        if terminated or truncated:
            finished += 1
            # judged after every 3 episodes; the keys are there from the start (NaN before)
            judged = np.isfinite(info["curriculum"]["balance"])
            assert judged == (finished >= 3), (finished, info["curriculum"])
            obs, info = env.reset()
    assert env.curriculum.episodes == 6


def test_the_wrapper_votes_on_each_episode_s_own_steps() -> None:
    """Each step's votes are drawn from sigmoid(logit) of (previous obs, action, obs), one draw per
    step from the wrapper's generator; at an episode's end rm_votes holds that episode's votes only
    and the step head's prediction is the mean of its expected votes."""
    base = gym.make("RLA-TextNav-v0", difficulty=0.2)
    prm = ProcessRewardModel.for_env(base, seed=0, device="cpu")
    env = ProcessRewardWrapper(base, prm, lam=0.5, m=3, seed=2)
    lengths = []
    generator = torch.Generator().manual_seed(2)
    rng = np.random.default_rng(0)
    for episode in range(3):
        obs, info = env.reset(seed=episode)
        votes, scores, done = [], [], False
        while not done:
            action = random_agent(obs, info, rng)
            before = obs["tokens"]
            obs, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            steps = {
                "obs": torch.as_tensor(before)[None], "action": torch.as_tensor([action]),
                "next_obs": torch.as_tensor(obs["tokens"])[None],
            }  # fmt: skip
            with torch.no_grad():
                p = float(torch.sigmoid(prm.logits(steps))[0])
            drawn = np.where(torch.rand((1, 3), generator=generator).numpy()[0] < p, 1.0, -1.0)
            np.testing.assert_array_equal(info["rm_step_votes"], drawn)
            votes.append(drawn)
            scores.append(2 * p - 1)
        np.testing.assert_array_equal(info["rm_votes"], np.stack(votes))
        assert info["rm_outcome_prediction"] == pytest.approx(np.mean(scores), abs=1e-6)
        lengths.append(len(votes))
    assert min(lengths) > 1


def test_an_outer_time_limit_ends_an_episode_as_a_failure_in_the_loop_s_reward() -> None:
    """A user's ``TimeLimit`` cuts episodes before the env ends them (the env says outcome 0
    there): the loop's reward adds O = -1 and the PRM trains on outcome -1, as the curricula."""
    from gymnasium.wrappers import TimeLimit
    from stable_baselines3.common.env_util import make_vec_env

    from agents.loop_runtime import IntegratedRewardVecEnv

    venv = make_vec_env("rla_gym:RLA-TextNav-v0", n_envs=2, seed=0, env_kwargs={"difficulty": 0.8},
                        wrapper_class=TimeLimit, wrapper_kwargs={"max_episode_steps": 3})  # fmt: skip
    env = IntegratedRewardVecEnv(venv, None, mode="oracle", lam=0.0)
    env.reset()
    for _ in range(3):
        _, rewards, dones, _ = env.step(np.zeros(2, dtype=np.int64))
    assert dones.all() and rewards.tolist() == [-1.0, -1.0]
    assert [t.outcome for t in env.drain()] == [-1, -1]


def test_the_integrated_rewards_refuse_what_is_not_a_number() -> None:
    with pytest.raises(ValueError, match="scores must be a non-empty sequence in \\[-1, 1\\]"):
        integrated_trajectory_reward(1, [float("nan"), 0.5])
    assert integrated_step_rewards(1, [[1, 1]], lam=np.float32(0.5)).tolist() == [1.5]  # numpy numbers
