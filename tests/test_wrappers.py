"""AdaptiveDifficultyWrapper and CurriculumWrapper behaviour; the SB3 adapter in a real PPO run."""

from __future__ import annotations

import csv
import itertools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import DictRolloutBuffer
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

from agents.curriculum import CurriculumLoggingCallback, CurriculumVecEnv, masked_buffer_class
from agents.policies import TokenFeaturesExtractor
from rla_gym.curricula import EpisodeResult, FixedCurriculum, PrioritizedLevelReplay, SuccessBandCurriculum
from rla_gym.evaluation import oracle_agent, random_agent
from rla_gym.wrappers import AdaptiveDifficultyWrapper, CurriculumWrapper

ENV = "RLA-TextNav-v0"


class PredictionInInfo(gym.Wrapper):
    """Stands in for the reward-model wrapper: a fixed predicted outcome at the last step."""

    writes_rm_outcome_prediction = True

    def __init__(self, env: gym.Env, prediction: float) -> None:
        super().__init__(env)
        self.prediction = prediction

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info["rm_outcome_prediction"] = self.prediction
        return obs, reward, terminated, truncated, info


def _play(env: gym.Env, agent, episodes: int) -> list[dict]:
    rng = np.random.default_rng(0)
    finals = []
    obs, info = env.reset(seed=0)
    while len(finals) < episodes:
        obs, _, terminated, truncated, info = env.step(agent(obs, info, rng))
        if terminated or truncated:
            finals.append(info)
            obs, info = env.reset()
    return finals


def test_failing_learner_gets_easier_tasks_with_cooldown() -> None:
    # the RM predicts success (+1) while a random agent at d >= 0.3 nearly always fails: p_over ~ 1
    env = AdaptiveDifficultyWrapper(PredictionInInfo(gym.make(ENV), 1.0), interval=5, start=0.6, cooldown=1)
    finals = _play(env, random_agent, 30)
    difficulties = [info["difficulty"] for info in finals]
    # judgements after episodes 5, 10, 15, 20, 25, 30: lower, cooldown, lower, cooldown, lower, cooldown
    assert (
        difficulties[:5] == [0.6] * 5
        and difficulties[5:15] == [0.5] * 10
        and difficulties[15:25] == [0.4] * 10
    )
    assert env.unwrapped.difficulty == 0.3 and env.curriculum.changes == 3
    assert finals[-1]["curriculum"]["p_over"] == 1.0 and finals[-1]["curriculum"]["difficulty"] == 0.3


def test_succeeding_learner_gets_harder_tasks() -> None:
    # the RM predicts failure (-1) while the oracle always succeeds: p_under = 1
    env = AdaptiveDifficultyWrapper(PredictionInInfo(gym.make(ENV), -1.0), interval=3, start=0.8, cooldown=0)
    finals = _play(env, oracle_agent, 12)
    assert [f["difficulty"] for f in finals[::3]] == [0.8, 0.9, 1.0, 1.0]  # bounds default (0.1, 1.0)
    assert all(f["is_success"] for f in finals)


def test_literal_direction_moves_the_other_way() -> None:
    # the design notes' code: a failing learner (p_over = 1) gets harder tasks, a perfect one easier
    failing = AdaptiveDifficultyWrapper(
        PredictionInInfo(gym.make(ENV), 1.0), interval=5, start=0.5, cooldown=0, direction="literal"
    )
    assert [f["difficulty"] for f in _play(failing, random_agent, 15)[::5]] == [0.5, 0.6, 0.7]
    perfect = AdaptiveDifficultyWrapper(
        PredictionInInfo(gym.make(ENV), -1.0), interval=3, start=0.3, cooldown=0, direction="literal"
    )
    assert [f["difficulty"] for f in _play(perfect, oracle_agent, 12)[::3]] == [0.3, 0.2, 0.1, 0.1]


def test_starts_from_the_wrapped_envs_difficulty_within_bounds() -> None:
    predict = {"predict_outcome": lambda trajectory: 0.0}
    inside = AdaptiveDifficultyWrapper(gym.make(ENV, difficulty=0.7), **predict)
    assert inside.reset(seed=0)[1]["difficulty"] == 0.7
    outside = AdaptiveDifficultyWrapper(gym.make(ENV, difficulty=0.05), **predict)  # below (0.1, 1.0)
    assert outside.reset(seed=0)[1]["difficulty"] == 0.1
    given = AdaptiveDifficultyWrapper(gym.make(ENV, difficulty=0.7), start=0.4, **predict)
    assert given.reset(seed=0)[1]["difficulty"] == 0.4
    with pytest.raises(ValueError, match="direction must be one of"):
        AdaptiveDifficultyWrapper(gym.make(ENV), direction="up", **predict)


def test_predict_outcome_sees_the_whole_trajectory() -> None:
    seen: list[list] = []

    def predict(trajectory):
        seen.append(trajectory)
        return 0.0

    env = AdaptiveDifficultyWrapper(gym.make(ENV), interval=4, predict_outcome=predict)
    lengths = []
    obs, info = env.reset(seed=1)
    steps = 0
    rng = np.random.default_rng(1)
    while len(lengths) < 4:
        obs, _, terminated, truncated, info = env.step(random_agent(obs, info, rng))
        steps += 1
        if terminated or truncated:
            lengths.append(steps)
            assert info["rm_outcome_prediction"] == 0.0
            obs, info, steps = *env.reset(), 0
    assert [len(t) for t in seen] == lengths
    for trajectory in seen:
        for (_, _, after), (before, _, _) in itertools.pairwise(trajectory):
            assert after is before  # consecutive steps chain


class LiesAboutPredictions(gym.Wrapper):
    writes_rm_outcome_prediction = True


def test_finds_a_declaring_wrapper_below_other_wrappers() -> None:
    stacked = gym.wrappers.RecordEpisodeStatistics(PredictionInInfo(gym.make(ENV), 1.0))
    env = AdaptiveDifficultyWrapper(stacked, interval=5, start=0.6, cooldown=0)
    finals = _play(env, random_agent, 5)
    assert "episode" in finals[-1] and env.curriculum.last["p_over"] == 1.0  # the prediction got through


def test_missing_or_bad_predictions_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="needs info\\['rm_outcome_prediction'\\]"):
        AdaptiveDifficultyWrapper(gym.make(ENV))  # fails at construction, not at the first episode end
    env = AdaptiveDifficultyWrapper(LiesAboutPredictions(gym.make(ENV)))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="needs info\\['rm_outcome_prediction'\\]"):
        _play(env, random_agent, 1)  # a wrapper that declares it but writes none: caught at the end
    env = AdaptiveDifficultyWrapper(gym.make(ENV), predict_outcome=lambda t: 2.0)
    with pytest.raises(ValueError, match="must return a number in \\[-1, 1\\], got 2.0"):
        _play(env, random_agent, 1)
    with pytest.raises(ValueError, match="bounds\\[0\\] must be < bounds\\[1\\]"):
        AdaptiveDifficultyWrapper(gym.make(ENV), bounds=(0.9, 0.1), predict_outcome=lambda t: 0.0)


def test_curriculum_wrapper_reports_metrics_and_follows_the_curriculum() -> None:
    curriculum = SuccessBandCurriculum(ENV, window=5, step=0.2)
    env = CurriculumWrapper(gym.make(ENV), curriculum)
    finals = _play(env, oracle_agent, 20)  # always succeeds: up one step every 5 episodes
    assert [f["difficulty"] for f in finals[::5]] == [0.0, 0.2, 0.4, 0.6]
    assert finals[-1]["curriculum"]["moves"] == 4 and curriculum.episodes == 20


class _Results(FixedCurriculum):
    """A fixed difficulty that keeps every result it learns from."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.results: list[EpisodeResult] = []

    def _learn(self, result: EpisodeResult) -> None:
        self.results.append(result)


def test_curriculum_wrapper_reports_the_return_of_the_rewards_it_passes_on() -> None:
    """The return sums every step's reward as the wrappers below made it (a step penalty here),
    not just the last one."""
    curriculum = _Results(ENV, 0.0)
    env = CurriculumWrapper(gym.wrappers.TransformReward(gym.make(ENV), lambda r: r - 0.01), curriculum)
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    episode_return, returns = 0.0, []
    while len(returns) < 5:
        obs, reward, terminated, truncated, info = env.step(random_agent(obs, info, rng))
        episode_return += reward
        if terminated or truncated:
            returns.append(episode_return)
            episode_return = 0.0
            obs, info = env.reset()
    assert [r.episode_return for r in curriculum.results] == pytest.approx(returns)
    assert all(r.length > 1 for r in curriculum.results)


def _small_ppo(venv: Any, log_dir: Any, **kwargs: Any) -> PPO:
    """A small PPO with the token extractor, logging CSV to ``log_dir``."""
    model = PPO(
        "MultiInputPolicy", venv, n_steps=128, batch_size=128, n_epochs=2, seed=0,
        policy_kwargs={"features_extractor_class": TokenFeaturesExtractor}, **kwargs,
    )  # fmt: skip
    model.set_logger(configure(str(log_dir), ["csv"]))
    return model


def test_ppo_trains_through_the_sb3_curriculum_adapter(tmp_path) -> None:
    curriculum = SuccessBandCurriculum(ENV, window=16, step=0.1)
    venv = CurriculumVecEnv(make_vec_env(ENV, n_envs=2, seed=0), curriculum)
    model = _small_ppo(venv, tmp_path)
    model.learn(2048, callback=CurriculumLoggingCallback(curriculum))
    # every episode the envs finished (their Monitors count them) reached the curriculum once
    finished = [e.get_episode_rewards() for e in venv.venv.envs]  # type: ignore[attr-defined]
    assert curriculum.episodes == sum(map(len, finished)) > 50
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    logged = [float(row["curriculum/episodes"]) for row in rows]
    assert rows and "curriculum/difficulty" in rows[0] and logged == sorted(logged)
    assert 0 < logged[-1] <= curriculum.episodes
    # below the band at its floor (success under 0.8 at d = 0), the curriculum stays there
    assert {float(row["curriculum/difficulty"]) for row in rows} == {0.0}
    assert all(float(row["curriculum/success_rate"]) < 0.8 for row in rows)


class _Recorder(PrioritizedLevelReplay):
    """PLR that keeps every result it learns from."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.results: list[EpisodeResult] = []

    def _learn(self, result: EpisodeResult) -> None:
        self.results.append(result)
        super()._learn(result)


def test_deferred_adapter_reports_each_episode_with_its_values_across_rollout_ends() -> None:
    curriculum = _Recorder(ENV, bounds=(0.0, 0.3), replay_prob=0.0)
    venv = CurriculumVecEnv(make_vec_env(ENV, n_envs=2, seed=0), curriculum)
    assert venv.defer_updates  # positive value loss needs the learner's values
    venv.reset()
    rng = np.random.default_rng(0)
    code = np.zeros(2)  # values coded by (env, global step): 1000 * env + step
    episodes: list[list[tuple[int, float]]] = [[], []]  # per env: (value code, reward) of the running episode
    expected: list[tuple[list[float], list[float]]] = []
    for rollout in range(4):
        values, rewards = [], []
        for t in range(37):  # rollout ends cut episodes
            step = 37 * rollout + t
            code = np.array([step, 1000 + step], dtype=float)
            _, reward, dones, _ = venv.step(rng.integers(0, 4, 2))
            values.append(code)
            rewards.append(reward)
            for i in range(2):
                episodes[i].append((code[i], float(reward[i])))
                if dones[i]:
                    v, r = zip(*episodes[i], strict=True)
                    expected.append((list(v), list(r)))
                    episodes[i] = []
        before = len(curriculum.results)
        reported = venv.flush_updates(np.array(values), np.array(rewards))
        assert len(curriculum.results) == before + reported  # nothing reaches the curriculum before
    assert len(curriculum.results) == len(expected) > 8
    spans = 0
    for result, (v, r) in zip(curriculum.results, expected, strict=True):  # in finishing order
        assert result.value_estimates.tolist() == v and result.rewards.tolist() == r
        assert len(v) == result.length and sum(r) == pytest.approx(result.episode_return)
        spans += (v[0] % 1000) // 37 != (v[-1] % 1000) // 37
    assert spans > 0  # some episodes spanned a rollout end and still got all their steps
    with pytest.raises(ValueError, match=r"must have shape \(0, 2\)"):
        venv.flush_updates(np.zeros((3, 2)), np.zeros((3, 2)))


def test_adapter_without_values_needed_updates_at_once_and_validates_defer_updates() -> None:
    curriculum = SuccessBandCurriculum(ENV)
    venv = CurriculumVecEnv(make_vec_env(ENV, n_envs=2, seed=0), curriculum)
    assert not venv.defer_updates
    venv.reset()
    for _ in range(60):
        venv.step(np.zeros(2, dtype=int))
    assert curriculum.episodes > 0
    with pytest.raises(TypeError, match="defer_updates must be a bool or None, got 'yes'"):
        CurriculumVecEnv(make_vec_env(ENV, n_envs=1), curriculum, defer_updates="yes")


def test_ppo_scores_plr_levels_with_its_own_value_estimates(tmp_path) -> None:
    curriculum = _Recorder(ENV, bounds=(0.0, 0.3), buffer_size=16, seed=0)
    venv = CurriculumVecEnv(make_vec_env(ENV, n_envs=2, seed=0), curriculum)
    model = _small_ppo(venv, tmp_path, rollout_buffer_class=masked_buffer_class(DictRolloutBuffer))
    model.learn(1024, callback=CurriculumLoggingCallback(curriculum))
    assert curriculum.episodes == len(curriculum.results) > 10
    assert all(r.value_estimates.size == r.length for r in curriculum.results)
    scores = [level["score"] for level in curriculum.levels]
    assert len(set(scores)) > 1 and max(scores) > 0  # real positive value losses, not a constant
    with open(tmp_path / "progress.csv") as f:
        rows = list(csv.DictReader(f))
    shares = [float(row["loop/trained_share"]) for row in rows]
    assert min(shares) < 1.0  # robust PLR kept new levels' steps out of some update


def test_callback_refuses_to_train_on_masked_steps_with_a_plain_buffer() -> None:
    curriculum = PrioritizedLevelReplay(ENV, replay_prob=0.0)  # robust: new levels are masked
    venv = CurriculumVecEnv(make_vec_env(ENV, n_envs=2, seed=0), curriculum)
    model = PPO(
        "MultiInputPolicy", venv, n_steps=64, batch_size=64, seed=0,
        policy_kwargs={"features_extractor_class": TokenFeaturesExtractor},
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="not a MaskedSamples one"):
        model.learn(128, callback=CurriculumLoggingCallback(curriculum))
