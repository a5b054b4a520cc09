"""RLlib (new API stack) on the suite: registration on remote runners, the masking RLModule, and
one curriculum served by a Ray actor to every env runner, with the exactness checks of
``test_curriculum_exactness.py`` (what the curriculum handed out, what it was told, what the
runners' episodes ran). Needs ``pip install 'rla-gym[rllib]'``; skipped elsewhere."""

from __future__ import annotations

import math
import re
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("ray.rllib")

import ray
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

import rla_gym
from agents.integrations.rllib import (
    CurriculumMetricsCallback,
    MaskedTokenRLModule,
    make_rllib_env,
    register_rllib_envs,
)
from rla_gym.curricula import RewardModelBalanceCurriculum, serve_curriculum
from rla_gym.evaluation import random_agent

ROOT = Path(__file__).resolve().parent.parent
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # runners cannot import tests/
RUNNERS, ENVS_PER_RUNNER = 2, 2


@pytest.fixture
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def _ppo(env_id: str, env_config: dict[str, Any], callbacks: type = RLlibCallback) -> PPOConfig:
    return (
        PPOConfig()
        .environment(env_id, env_config=env_config)
        .env_runners(num_env_runners=RUNNERS, num_envs_per_env_runner=ENVS_PER_RUNNER)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=MaskedTokenRLModule))
        .training(train_batch_size_per_learner=512, minibatch_size=128, num_epochs=2)
        .callbacks(callbacks)
        .debugging(seed=0)
    )


@pytest.mark.parametrize("env_id", rla_gym.ENV_IDS)
def test_the_module_gives_masked_actions_probability_zero(env_id: str) -> None:
    env = gym.make(env_id, difficulty=0.5)
    module = MaskedTokenRLModule(
        observation_space=env.observation_space, action_space=env.action_space, model_config={}
    )
    observations, rng = [], np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    for _ in range(64):
        observations.append(obs)
        obs, _, terminated, truncated, info = env.step(random_agent(obs, info, rng))
        if terminated or truncated:
            obs, info = env.reset()
    batch = {key: torch.as_tensor(np.stack([o[key] for o in observations])) for key in observations[0]}
    allowed = batch["action_mask"].bool()
    assert not allowed.all()  # the check means something: some actions are masked
    with torch.no_grad():
        for forward in (module.forward_exploration, module.forward_inference, module.forward_train):
            logits = forward({Columns.OBS: batch})[Columns.ACTION_DIST_INPUTS]
            actions = module.get_exploration_action_dist_cls().from_logits(logits).sample(sample_shape=(200,))
            assert allowed.gather(1, actions.T).all()  # 200 draws per observation, none masked
            assert torch.softmax(logits, -1)[~allowed].max() == 0.0
        values = module.compute_values({Columns.OBS: batch})
    assert values.shape == (len(observations),) and torch.isfinite(values).all()


def test_the_creator_rejects_vector_and_unknown_ids() -> None:
    with pytest.raises(ValueError, match="not rla-gym ids"):
        register_rllib_envs(["CartPole-v1"])
    with pytest.raises(ValueError, match="gym_env_vectorize_mode 'sync'"):
        make_rllib_env("RLA-TextNav-v0", {"num_envs": 2})
    env = make_rllib_env("RLA-TextNav-v0", {"difficulty": 0.3})  # config keys go to gym.make
    assert env.reset(seed=0)[1]["difficulty"] == 0.3


def test_plain_ids_work_on_remote_runners_and_no_masked_action_is_ever_taken(cluster: None) -> None:
    register_rllib_envs()
    algo = _ppo("RLA-Household-v0", {"difficulty": 0.3}).build_algo()
    try:
        result = algo.train()  # PPO trains through the module's masked logits
        assert math.isfinite(result["learners"]["default_policy"]["total_loss"])
        sampled = algo.env_runner_group.foreach_env_runner(
            lambda runner: (runner.worker_index, runner.sample(num_timesteps=400)), local_env_runner=False
        )
    finally:
        algo.stop()
    assert sorted(index for index, _ in sampled) == [1, 2]  # both remote runners made the env
    steps = 0
    for _, episodes in sampled:
        for episode in episodes:
            masks, actions = episode.get_observations()["action_mask"], episode.get_actions()
            assert masks[np.arange(len(actions)), actions].all()
            assert not any(info["invalid_action"] for info in episode.get_infos()[1:])
            steps += len(actions)
    assert steps >= 800


class PredictsNothing(gym.Wrapper):
    """A stand-in reward model: predicts outcome 0 at each episode's last step."""

    writes_rm_outcome_prediction = True

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info["rm_outcome_prediction"] = 0.0
        return obs, reward, terminated, truncated, info


class RecordsEpisodes(CurriculumMetricsCallback):
    """The runners' own account of every finished episode: slot, task key, outcome, length, difficulty."""

    def on_episode_end(
        self, *, episode: Any, env: Any, env_index: int, env_runner: Any, **kwargs: Any
    ) -> None:
        super().on_episode_end(episode=episode, env=env, env_index=env_index, env_runner=env_runner, **kwargs)
        info = episode.get_infos(-1)
        slot = env.unwrapped.envs[env_index].get_wrapper_attr("slot")
        record = (int(info["task_key"]), int(info["outcome"]), len(episode), float(info["difficulty"]))
        env_runner.__dict__.setdefault("rla_finished", []).append((env_runner.worker_index, slot, record))


@pytest.mark.slow
def test_one_served_curriculum_counts_exactly_the_episodes_all_runners_finished(cluster: None) -> None:
    curriculum = RewardModelBalanceCurriculum("RLA-TextNav-v0", start=0.5, interval=8, step=0.1)
    server = serve_curriculum(curriculum, name="rla-curriculum")
    register_rllib_envs(["RLA-TextNav-v0"], wrap=PredictsNothing)
    algo = _ppo("RLA-TextNav-v0", {"curriculum": "rla-curriculum"}, RecordsEpisodes).build_algo()
    try:
        for _ in range(4):
            result = algo.train()
        finished = algo.env_runner_group.foreach_env_runner(
            lambda runner: runner.__dict__.get("rla_finished", []), local_env_runner=False
        )
    finally:
        algo.stop()
    issued, reported = ray.get(server.log.remote())
    metrics = ray.get(server.metrics.remote())
    observed: dict[int, list[tuple[int, int, int, float]]] = defaultdict(list)
    runners_of: dict[int, int] = {}
    for records in finished:
        for runner, slot, record in records:
            observed[slot].append(record)
            runners_of[slot] = runner
    total = sum(map(len, observed.values()))
    # the one curriculum's count is every episode all runners finished, by RLlib's count and theirs
    assert (
        int(metrics["episodes"]) == len(reported) == total == result["env_runners"]["num_episodes_lifetime"]
    )
    assert total > 40 and len(set(reported)) == len(reported)  # fresh seeds: each reported once
    assert sorted(runners_of.values()) == [1, 1, 2, 2] and sorted(issued) == sorted(observed)
    for slot, episodes in observed.items():
        assert [e[0] for e in episodes] == issued[slot][: len(episodes)], f"slot {slot} ran other tasks"
        # outstanding: the running episode's task, or none where an episode ended in the last
        # sampled step (RLlib's autoreset is NEXT_STEP: that env draws its next task at its next step)
        assert len(issued[slot]) - len(episodes) in (0, 1)
    assert sorted(reported) == sorted(e[0] for episodes in observed.values() for e in episodes)
    # the adaptive rule moved the difficulty, and every runner's envs followed it
    assert metrics["changes"] >= 1
    for slot, episodes in observed.items():
        assert len({e[3] for e in episodes}) >= 2, f"slot {slot} never saw the difficulty move"
    assert "curriculum" in result["env_runners"]  # CurriculumMetricsCallback's entries


def _page_block(containing: str) -> str:
    page = (ROOT / "docs" / "integrations.md").read_text()
    return next(b for b in re.findall(r"```python\n(.*?)```", page, flags=re.S) if containing in b)


@pytest.mark.slow
def test_the_integrations_page_rllib_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    try:
        exec(compile(_page_block("PPOConfig"), "integrations.md", "exec"), namespace)
        finished, seen, difficulty = capsys.readouterr().out.split()[-3:]
        assert int(finished) == int(seen) > 40  # the one curriculum saw every runner's episodes
        assert ray.get(namespace["server"].metrics.remote())["changes"] >= 1  # the adaptive rule moved it
        assert 0.1 <= float(difficulty) <= 1.0  # within the rule's bounds
    finally:
        ray.shutdown()
