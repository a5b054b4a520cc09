"""Every episode runs exactly the task the curriculum assigned; every finished episode is reported once.

Model: Syllabus's synchronisation tests. A deterministic curriculum hands out unique tasks
and records what it assigned per slot and what it was told; the test loop watches the
env's own infos independently and compares the three accounts.
"""

from __future__ import annotations

from collections import defaultdict

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from agents.curriculum import CurriculumVecEnv
from agents.vec_env import BatchedVecEnv
from rla_gym.core import Task
from rla_gym.curricula import Curriculum, EpisodeResult
from rla_gym.wrappers import CurriculumVectorWrapper, CurriculumWrapper

ENV_ID = "RLA-TextNav-v0"
EPISODES = 2000
N_ENVS = 4


class RecordingCurriculum(Curriculum):
    """Unique tasks (seed = a counter) over short difficulties; logs assignments and updates."""

    def __init__(self) -> None:
        super().__init__(ENV_ID)
        self.counter = 0
        self.assigned: dict[int, list[Task]] = defaultdict(list)
        self.results: list[EpisodeResult] = []

    def next_task(self, slot: int = 0) -> Task:
        self.counter += 1
        task = Task(ENV_ID, (self.counter % 3) / 20, self.counter)
        self.assigned[slot].append(task)
        return task

    def _learn(self, result: EpisodeResult) -> None:
        self.results.append(result)


def _check(curriculum: RecordingCurriculum, observed: dict[int, list[tuple[str, int, int]]]) -> int:
    """observed[env] = [(task_key, outcome, length), ...] of finished episodes, as the env reported them."""
    total = sum(len(episodes) for episodes in observed.values())
    assert total >= EPISODES
    for slot, episodes in observed.items():
        assigned = [t.key for t in curriculum.assigned[slot]]
        assert [e[0] for e in episodes] == assigned[: len(episodes)], f"env {slot} ran other tasks"
        assert len(assigned) - len(episodes) <= 2  # only the running and the queued task are outstanding
    told = {r.task.key: (r.task.key, r.outcome, r.length) for r in curriculum.results}
    assert len(told) == len(curriculum.results) == total, "an episode was reported twice or not at all"
    assert sorted(told.values()) == sorted(e for episodes in observed.values() for e in episodes)
    return total


def test_single_env_wrapper_is_exact() -> None:
    curriculum = RecordingCurriculum()
    env = CurriculumWrapper(gym.make(ENV_ID), curriculum)
    env.action_space.seed(0)
    observed: dict[int, list] = defaultdict(list)
    env.reset(seed=0)
    length = 0
    while len(observed[0]) < EPISODES:
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        length += 1
        if terminated or truncated:
            observed[0].append((info["task_key"], info["outcome"], length))
            env.reset()
            length = 0
    assert _check(curriculum, observed) == EPISODES


@pytest.mark.parametrize(
    ("mode", "autoreset"),
    [("sync", AutoresetMode.NEXT_STEP), ("sync", AutoresetMode.SAME_STEP), ("async", AutoresetMode.NEXT_STEP),
     ("async", AutoresetMode.SAME_STEP), ("vector_entry_point", AutoresetMode.NEXT_STEP),
     ("vector_entry_point", AutoresetMode.SAME_STEP), ("array_state", AutoresetMode.NEXT_STEP),
     ("array_state", AutoresetMode.SAME_STEP)],
)  # fmt: skip
def test_gymnasium_vector_wrapper_is_exact(mode: str, autoreset: AutoresetMode) -> None:
    curriculum = RecordingCurriculum()
    if mode in ("vector_entry_point", "array_state"):  # the batched env takes keyword arguments
        base = gym.make_vec(
            ENV_ID, N_ENVS, vectorization_mode="vector_entry_point", autoreset_mode=autoreset,
            array_state=mode == "array_state",
        )  # fmt: skip
    else:
        base = gym.make_vec(
            ENV_ID, N_ENVS, vectorization_mode=mode, vector_kwargs={"autoreset_mode": autoreset}
        )
    envs = CurriculumVectorWrapper(base, curriculum)
    observed: dict[int, list] = defaultdict(list)
    lengths = np.zeros(N_ENVS, dtype=int)
    returns = np.zeros(N_ENVS)  # the rewards summed over each running episode
    episode_returns: dict[str, float] = {}  # task key -> its episode's return
    restarting = np.zeros(N_ENVS, dtype=bool)
    rng = np.random.default_rng(0)
    try:
        envs.reset(seed=0)
        while sum(map(len, observed.values())) < EPISODES:
            _, rewards, terminated, truncated, info = envs.step(rng.integers(0, 24, N_ENVS))
            done = terminated | truncated
            if autoreset == AutoresetMode.SAME_STEP:
                lengths += 1
                returns += rewards
                final = info.get("final_info", {})
                for i in np.flatnonzero(done):
                    observed[i].append((final["task_key"][i], final["outcome"][i], lengths[i]))
                    episode_returns[final["task_key"][i]] = returns[i]
                lengths[done] = returns[done] = 0
            else:
                lengths[restarting] = returns[restarting] = 0
                lengths[~restarting] += 1
                returns[~restarting] += rewards[~restarting]
                for i in np.flatnonzero(done & ~restarting):
                    observed[i].append((info["task_key"][i], info["outcome"][i], lengths[i]))
                    episode_returns[info["task_key"][i]] = returns[i]
                restarting = done & ~restarting
    finally:
        envs.close()
    _check(curriculum, observed)
    # each result's return is its own episode's rewards, summed (none carried over from the last)
    assert {r.task.key: r.episode_return for r in curriculum.results} == pytest.approx(episode_returns)
    assert 0 < sum(episode_returns.values()) < len(episode_returns)  # some succeeded, some failed


@pytest.mark.parametrize("vec_env_cls", [DummyVecEnv, SubprocVecEnv, BatchedVecEnv])
def test_sb3_vecenv_adapter_is_exact(vec_env_cls: type) -> None:
    curriculum = RecordingCurriculum()
    if vec_env_cls is BatchedVecEnv:
        inner = BatchedVecEnv(ENV_ID, N_ENVS, seed=0)
    else:  # "rla_gym:" makes SubprocVecEnv's forkserver workers import rla_gym, which registers the id
        inner = make_vec_env(f"rla_gym:{ENV_ID}", n_envs=N_ENVS, seed=0, vec_env_cls=vec_env_cls)
    venv = CurriculumVecEnv(inner, curriculum)
    observed: dict[int, list] = defaultdict(list)
    lengths = np.zeros(N_ENVS, dtype=int)
    rng = np.random.default_rng(0)
    try:
        venv.reset()
        while sum(map(len, observed.values())) < EPISODES:
            _, _, dones, infos = venv.step(rng.integers(0, 24, N_ENVS))
            lengths += 1
            for i in np.flatnonzero(dones):
                observed[i].append((infos[i]["task_key"], infos[i]["outcome"], lengths[i]))
                lengths[i] = 0
    finally:
        venv.close()
    _check(curriculum, observed)


class PredictsEvenSubEnvs(gym.vector.VectorWrapper):
    """Writes a predicted outcome for the even sub-envs' finished episodes only: the odd ones'
    entries are padding, masked off by ``info["_rm_outcome_prediction"]``."""

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        even = (terminated | truncated) & (np.arange(self.num_envs) % 2 == 0)
        info["rm_outcome_prediction"] = np.where(even, 0.5, 0.0)
        info["_rm_outcome_prediction"] = even
        return obs, rewards, terminated, truncated, info

    def set_attr(self, name, values) -> None:
        self.env.set_attr(name, values)


def test_vector_wrapper_reads_only_the_sub_envs_an_info_key_marks() -> None:
    curriculum = RecordingCurriculum()
    envs = CurriculumVectorWrapper(PredictsEvenSubEnvs(gym.make_vec(ENV_ID, N_ENVS)), curriculum)
    rng = np.random.default_rng(0)
    envs.reset(seed=0)
    for _ in range(300):
        envs.step(rng.integers(0, 24, N_ENVS))
    slot_of = {task.key: slot for slot, tasks in curriculum.assigned.items() for task in tasks}
    predictions = defaultdict(set)
    for r in curriculum.results:
        predictions[slot_of[r.task.key]].add(r.rm_outcome_prediction)
    assert dict(predictions) == {0: {0.5}, 1: {None}, 2: {0.5}, 3: {None}}  # None, not the padding


def test_a_foreign_reset_is_detected() -> None:
    curriculum = RecordingCurriculum()
    envs = CurriculumVectorWrapper(gym.make_vec(ENV_ID, 2), curriculum)
    envs.reset(seed=0)
    envs.env.set_attr("pinned_task", [Task(ENV_ID, 0.0, 10**6)] * 2)  # someone bypasses the curriculum
    with pytest.raises(RuntimeError, match="not the assigned"):
        for _ in range(200):
            envs.step(np.array([23, 23]))


def test_adapters_refuse_task_options_and_foreign_envs() -> None:
    env = CurriculumWrapper(gym.make(ENV_ID), RecordingCurriculum())
    with pytest.raises(ValueError, match="conflict with the curriculum"):
        env.reset(options={"difficulty": 0.5})
    with pytest.raises(TypeError, match="needs an rla_gym env"):
        CurriculumWrapper(gym.make("CartPole-v1"), RecordingCurriculum())
