"""The batched vector env runs exactly what single envs run, for every family; its SB3 adapter."""

from __future__ import annotations

import hashlib
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from vector_checks import (
    array_and_lean,
    check_shared_tasks_generated_once,
    oracle_led_actions,
    reset_both,
    same,
    step_alike_at_every_difficulty,
    step_both,
)

import rla_gym
from agents.vec_env import BatchedVecEnv
from rla_gym.core import Task
from rla_gym.vector import ARRAY_STATE_MIN_ENVS, RLAVectorEnv

N = 5


def _masked_actions(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Mostly admissible commands, sometimes any command (inadmissible ones are no-ops)."""
    actions = [rng.choice(np.flatnonzero(m)) if rng.random() < 0.9 else rng.integers(len(m)) for m in masks]
    return np.array(actions, dtype=np.int64)


#: Info values single envs give as ``np.bool_``: Gymnasium's SyncVectorEnv batches them in object
#: arrays (its ``_add_info`` types an array only for Python scalars and ``np.number``), the lean
#: loop in bool arrays. They stay ``np.bool_`` because TorchRL's info reader needs a ``dtype``
#: (a Python bool fails there: ``'bool' object has no attribute 'dtype'``).
NUMPY_BOOL_KEYS = ("invalid_action", "is_success")


def _bool_arrays(info: dict[str, Any]) -> dict[str, Any]:
    """SyncVectorEnv's ``info`` (and ``final_info`` in it) with :data:`NUMPY_BOOL_KEYS` in bool arrays."""
    out = dict(info)
    if "final_info" in info:
        out["final_info"] = _bool_arrays(info["final_info"])
    for key in NUMPY_BOOL_KEYS:
        assert info[key].dtype == object and all(type(x) is np.bool_ for x in info[key][info["_" + key]])
        out[key] = info[key].astype(bool)  # None (unflagged) becomes False
    return out


class _SyncWithBoolArrays(gym.vector.VectorWrapper):
    """SyncVectorEnv with the lean loop's info dtypes (:data:`NUMPY_BOOL_KEYS`), so that the
    comparison keeps checking every other dtype."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, _bool_arrays(info)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        *step, info = self.env.step(actions)
        return (*step, _bool_arrays(info))


@pytest.mark.parametrize("env_id", rla_gym.ENV_IDS)
@pytest.mark.parametrize("obs_mode", ["dict", "flat"])
def test_batched_env_matches_single_envs_step_for_step(env_id: str, obs_mode: str) -> None:
    kwargs = {"difficulty": 0.3, "obs_mode": obs_mode}
    ours = gym.make_vec(env_id, num_envs=N, **kwargs)
    assert isinstance(ours, RLAVectorEnv)
    theirs = _SyncWithBoolArrays(SyncVectorEnv([lambda: gym.make(env_id, **kwargs) for _ in range(N)]))
    tasks = [Task(env_id, d, 100 + k) for k, d in enumerate((0.0, 0.2, 0.4, 0.6, 0.8))]
    ours.set_attr("pinned_task", tasks[:2] + [None] * 3)  # two sub-envs on given tasks, three seeded
    theirs.unwrapped.set_attr("pinned_task", tasks[:2] + [None] * 3)
    rng = np.random.default_rng(0)
    _, info_b = reset_both(ours, theirs, seed=7)
    finished = 0
    for t in range(400):
        if t == 150:  # new tasks for every sub-env, in one call, from their next reset on
            ours.set_attr("pinned_task", tasks)
            theirs.unwrapped.set_attr("pinned_task", tasks)
        _, _, term, trunc, info_b = step_both(ours, theirs, _masked_actions(info_b["action_mask"], rng))
        finished += int((term | trunc).sum())
    assert finished >= 10


@pytest.mark.parametrize("env_id", rla_gym.ENV_IDS)
def test_same_step_autoreset_reports_the_last_step_as_gymnasium_does(env_id: str) -> None:
    kwargs = {"difficulty": 0.2, "autoreset_mode": AutoresetMode.SAME_STEP}
    ours = gym.make_vec(env_id, num_envs=N, **kwargs)
    theirs = gym.make_vec(env_id, N, vectorization_mode="sync", difficulty=0.2,
                          vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})  # fmt: skip
    theirs = _SyncWithBoolArrays(theirs)
    rng = np.random.default_rng(1)
    _, info_b = reset_both(ours, theirs, seed=3)
    finals = 0
    for _ in range(300):
        _, _, term, trunc, info_b = step_both(ours, theirs, _masked_actions(info_b["action_mask"], rng))
        finals += int((term | trunc).sum())  # final_obs and final_info compared there
    assert finals >= 5


def test_make_vec_modes_kwargs_text_obs_and_bad_input() -> None:
    assert isinstance(gym.make_vec("RLA-GUI-v0", 2, vectorization_mode="sync"), SyncVectorEnv)
    envs = gym.make_vec("RLA-Reason-v0", num_envs=3, obs_mode="text", difficulty=0.1)
    obs, info = envs.reset(seed=0)
    assert isinstance(obs, tuple) and len(obs) == 3 and all(isinstance(o, str) for o in obs)
    assert np.allclose(info["difficulty"], 0.1)
    with pytest.raises(RuntimeError, match="before reset"):
        gym.make_vec("RLA-TextNav-v0", 2).step(np.zeros(2, dtype=int))
    with pytest.raises(ValueError, match=r"actions must be 3 integers, got \[0, 1\]"):
        envs.step([0, 1])
    with pytest.raises(ValueError, match=r"actions must lie in \[0, "):
        envs.step(np.array([0, 1, 999]))
    with pytest.raises(ValueError, match="num_envs must be an integer >= 1, got 0"):
        gym.make_vec("RLA-TextNav-v0", num_envs=0)
    with pytest.raises(ValueError, match="tasks must have one entry per sub-env"):
        envs.set_tasks([None])
    before = envs.get_attr("difficulty")
    with pytest.raises(ValueError, match=r"difficulties\[1\] must be in \[0, 1\], got 2\.0"):
        envs.set_difficulties([0.0, 2.0, 0.5])
    assert envs.get_attr("difficulty") == before  # nothing half set
    with pytest.raises(ValueError, match=r"autoreset_mode must be NEXT_STEP, SAME_STEP or DISABLED, got 'fo"):
        gym.make_vec("RLA-TextNav-v0", num_envs=2, autoreset_mode="foo")
    for vector in (envs, gym.make_vec("RLA-TextNav-v0", num_envs=64)):  # the lean loop, the array state
        with pytest.raises(ValueError, match=r"unknown reset options \['foo'\]; use .*'reset_mask'"):
            vector.reset(options={"foo": 1})
    with pytest.raises(ValueError, match="n_envs must be an integer >= 1, got 0"):
        BatchedVecEnv("RLA-TextNav-v0", 0)
    envs.set_difficulties([0.0, 0.5, 1.0])
    _, info = envs.reset()
    assert info["difficulty"].tolist() == [0.0, 0.5, 1.0]
    envs.set_difficulties(0.25)
    assert envs.get_attr("difficulty") == (0.25, 0.25, 0.25)
    assert envs.call("action_masks")[0].dtype == bool and envs.action_masks().shape == (
        3,
        len(envs.envs[0].action_names),
    )


def test_oracle_info_off_drops_the_oracle_key_only() -> None:
    envs = gym.make_vec("RLA-TextNav-v0", num_envs=2, oracle_info=False)
    _, info = envs.reset(seed=0)
    assert "oracle_mask" not in info and info["_distance"].all()


def test_sb3_adapter_gives_what_dummy_vec_env_gives() -> None:
    from stable_baselines3.common.env_util import make_vec_env

    ours = BatchedVecEnv("RLA-Household-v0", 3, seed=5, env_kwargs={"difficulty": 0.2})
    theirs = make_vec_env("RLA-Household-v0", n_envs=3, seed=5, env_kwargs={"difficulty": 0.2})
    obs_a, obs_b = ours.reset(), theirs.reset()
    assert same(obs_a, obs_b)
    rng = np.random.default_rng(2)
    dones = 0
    for _ in range(300):
        actions = _masked_actions(np.stack(theirs.env_method("action_masks")), rng)
        obs_a, r_a, d_a, infos_a = ours.step(actions)
        obs_b, r_b, d_b, infos_b = theirs.step(actions)
        assert same(obs_a, obs_b) and same(r_a, r_b) and same(d_a, d_b)
        for i in range(3):
            for key in ("task_key", "progress", "distance", "outcome", "TimeLimit.truncated"):
                assert infos_a[i].get(key) == infos_b[i].get(key), key
            if d_a[i]:
                dones += 1
                assert np.array_equal(infos_a[i]["terminal_observation"]["tokens"],
                                      infos_b[i]["terminal_observation"]["tokens"])  # fmt: skip
                assert ours.reset_infos[i]["task_key"] == theirs.reset_infos[i]["task_key"]
                # SB3's Monitor figures: its return and length (the time differs)
                episode_a, episode_b = infos_a[i]["episode"], infos_b[i]["episode"]
                assert (episode_a["r"], episode_a["l"]) == (episode_b["r"], episode_b["l"])
    assert dones >= 5
    assert ours.env_method("set_task", Task("RLA-Household-v0", 0.0, 1), indices=[1]) == [None]
    assert ours.get_attr("pinned_task", indices=1)[0].seed == 1
    assert np.stack(ours.env_method("action_masks")).shape == (3, ours.action_space.n)


def test_the_sb3_adapter_takes_options_and_names_bad_arguments() -> None:
    """``set_options`` reaches the next reset, as with ``DummyVecEnv`` (it was dropped); an unknown
    or foreign id and a bad seed are named when the adapter is made."""
    from stable_baselines3.common.env_util import make_vec_env

    venv = BatchedVecEnv("RLA-TextNav-v0", 2, seed=0, env_kwargs={"difficulty": 0.2})
    dummy = make_vec_env("RLA-TextNav-v0", n_envs=2, seed=0, env_kwargs={"difficulty": 0.2})
    for each in (venv, dummy):
        each.set_options({"difficulty": 0.9})
        each.reset()
    assert [info["difficulty"] for info in venv.reset_infos] == [0.9, 0.9]
    assert [info["task_key"] for info in venv.reset_infos] == [info["task_key"] for info in dummy.reset_infos]
    venv.set_options([{"difficulty": 0.9}, {}])
    with pytest.raises(ValueError, match="one options dict for every sub-env"):
        venv.reset()
    with pytest.raises(ValueError, match="unknown env id 'Nope-v0'"):
        BatchedVecEnv("Nope-v0", 2)
    with pytest.raises(ValueError, match="'CartPole-v1' is not an rla-gym environment"):
        BatchedVecEnv("CartPole-v1", 2)
    with pytest.raises(ValueError, match="seed must be an integer >= 0 or None, got 'a'"):
        BatchedVecEnv("RLA-TextNav-v0", 2, seed="a")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_the_curriculum_adapter_declares_the_autoreset_mode(mode: AutoresetMode) -> None:
    from rla_gym.curricula import FixedCurriculum
    from rla_gym.wrappers import CurriculumVectorWrapper

    base = gym.make_vec("RLA-TextNav-v0", num_envs=2, autoreset_mode=mode)
    assert base.autoreset_mode == mode
    envs = CurriculumVectorWrapper(base, FixedCurriculum("RLA-TextNav-v0", 0.2))
    assert envs.autoreset_mode == mode

    stats = gym.wrappers.vector.RecordEpisodeStatistics(base)  # Gymnasium's vector wrappers hide set_attr
    with pytest.raises(TypeError, match="wrap the vector env itself"):
        CurriculumVectorWrapper(stats, FixedCurriculum("RLA-TextNav-v0", 0.2))


@pytest.mark.parametrize(
    "autoreset", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
)
def test_textnav_array_state_env_matches_the_lean_loop_at_every_difficulty(autoreset: AutoresetMode) -> None:
    from rla_gym.envs.textnav_vector import TextNavVectorEnv

    n = 22  # difficulties 0, 0.05, ..., 1: live / route / no directions, closed and locked doors, bring
    ours, theirs = array_and_lean(
        "RLA-TextNav-v0", n, TextNavVectorEnv, difficulty=0.5, autoreset_mode=autoreset
    )
    outcomes: list[int] = []
    for _, _, ended in step_alike_at_every_difficulty(ours, theirs, 700):
        outcomes += ended.tolist()
    assert outcomes.count(1) >= 100 and outcomes.count(-1) >= 5  # successes and budget cuts


def test_array_state_is_chosen_per_family_and_mode() -> None:
    from rla_gym.envs.textnav_vector import TextNavVectorEnv

    big = ARRAY_STATE_MIN_ENVS
    assert isinstance(gym.make_vec("RLA-TextNav-v0", big), TextNavVectorEnv)
    assert type(gym.make_vec("RLA-TextNav-v0", big - 1)) is RLAVectorEnv  # numpy overhead wins below
    assert isinstance(gym.make_vec("RLA-TextNav-v0", 2, array_state=True), TextNavVectorEnv)
    assert type(gym.make_vec("RLA-TextNav-v0", big, obs_mode="text")) is RLAVectorEnv
    assert type(gym.make_vec("RLA-TextNav-v0", big, array_state=False)) is RLAVectorEnv
    assert type(gym.make_vec("RLA-GUI-v0", big)) is RLAVectorEnv  # the GUI's crossover is higher
    assert type(gym.make_vec("RLA-GUI-v0", 128)).__name__ == "GUIVectorEnv"
    assert type(gym.make_vec("RLA-Household-v0", big)).__name__ == "HouseholdVectorEnv"
    assert type(gym.make_vec("RLA-Reason-v0", big)).__name__ == "ReasonVectorEnv"
    with pytest.raises(TypeError, match="array_state must be True, False or None, got 'yes'"):
        gym.make_vec("RLA-TextNav-v0", 2, array_state="yes")
    flat = gym.make_vec("RLA-TextNav-v0", 3, obs_mode="flat", difficulty=0.7, array_state=True)
    obs, info = flat.reset(seed=2)
    assert obs.shape == (3, 69 + 24) and obs.dtype == np.float32
    assert np.array_equal(obs[:, 69:], info["action_mask"])
    with pytest.raises(ValueError, match="'text' uses RLAVectorEnv"):
        TextNavVectorEnv(2, obs_mode="text")


def test_action_masks_come_from_the_batch_for_maskable_ppo() -> None:
    """MaskablePPO asks ``env_method("action_masks")``; the array-state sub-envs hold no state."""
    venv = BatchedVecEnv("RLA-TextNav-v0", 6, seed=1, env_kwargs={"difficulty": 0.6, "array_state": True})
    obs = venv.reset()
    rng = np.random.default_rng(0)
    for _ in range(40):
        masks = np.stack(venv.env_method("action_masks"))
        assert masks.dtype == bool and np.array_equal(masks, obs["action_mask"].astype(bool))
        assert np.array_equal(np.stack(venv.vector.call("action_masks")), masks)
        obs, _, _, _ = venv.step(_masked_actions(obs["action_mask"], rng))


def test_textnav_array_state_env_generates_a_shared_task_once_and_copies_it() -> None:
    from rla_gym.envs.textnav_vector import TextNavVectorEnv

    ours, theirs = array_and_lean("RLA-TextNav-v0", 8, TextNavVectorEnv, autoreset_mode="SameStep")
    check_shared_tasks_generated_once(ours, theirs, "RLA-TextNav-v0", 300)


@pytest.mark.parametrize("env_id", rla_gym.ENV_IDS)
def test_every_array_state_env_runs_disabled_autoreset_as_the_lean_loop(
    env_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guard against drift between the families: each array-state env under DISABLED (as the
    group trainer runs it: groups pinned to one task, generated once, finished sub-envs restarted
    by reset_mask) steps as the lean loop does."""
    from rla_gym.vector_arrays import ArrayVectorEnv

    n = 12
    ours, theirs = array_and_lean(
        env_id, n, ArrayVectorEnv, difficulty=0.3, autoreset_mode=AutoresetMode.DISABLED
    )
    tasks = [Task(env_id, 0.1, 3)] * 3 + [Task(env_id, 0.6, 8)] * 2 + [None] * (n - 5)  # two groups
    levels = np.round(np.linspace(0.0, 1.0, n), 3)
    for env in (ours, theirs):
        env.set_difficulties(levels)
        env.set_tasks(tasks)
    generated: list[Task] = []
    generate = type(ours.envs[0])._generate

    def counting(env: Any, task: Task) -> None:
        generated.append(task)
        generate(env, task)

    monkeypatch.setattr(type(ours.envs[0]), "_generate", counting)
    obs_b, info_b = reset_both(ours, theirs, seed=21)
    assert len(generated) == (n - 3) + n and generated[:2] == [tasks[0], tasks[3]]  # ours: one per group
    rng = np.random.default_rng(6)
    finished = np.zeros(n, dtype=bool)
    episodes = 0
    for t in range(120):
        if t % 6 == 5 and finished.any():  # restart the finished ones by hand
            obs_b, info_b = reset_both(ours, theirs, options={"reset_mask": finished.copy()})
            finished[:] = False
        actions = oracle_led_actions(info_b["oracle_mask"], obs_b["action_mask"], rng)
        obs_b, _, term, trunc, info_b = step_both(ours, theirs, actions)  # so our info's keys, flags too
        done = term | trunc
        assert not (finished & done).any() and not info_b["_distance"][finished].any()
        assert "final_obs" not in info_b
        finished |= done
        episodes += int(done.sum())
    assert episodes >= 50  # 72-110 measured
    assert ours.get_attr("task") == theirs.get_attr("task")


#: Digests of :func:`_world_digest`: every family's worlds as generated before the generators
#: were made faster (same draws, same worlds); a change of any world shows here.
WORLD_DIGESTS = {
    "RLA-TextNav-v0": "ac2f39e386bff799",
    "RLA-Household-v0": "b591782c0f2239fb",
    "RLA-GUI-v0": "fdf7298486e9392f",
    "RLA-GUI-v1": "d522180dbd20d3dc",  # added with v1 (v0's worlds but for OK from d = 0.1)
    "RLA-Reason-v0": "00d7c6f2759d1c84",
}


def _world_digest(env_id: str) -> str:
    """A digest of the first observation (tokens, masks, text), oracle, optimal length and budget
    of 225 tasks spread over the difficulties."""
    env = gym.make(env_id).unwrapped
    text = gym.make(env_id, obs_mode="text").unwrapped
    digest = hashlib.sha256()
    for d in (0.0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0):
        for seed in range(25):
            task = Task(env_id, d, 1000 + 37 * seed)
            obs, info = env.reset(options={"task": task})
            digest.update(
                obs["tokens"].tobytes() + obs["action_mask"].tobytes() + info["oracle_mask"].tobytes()
            )
            digest.update(np.array([info["optimal_len"], info["step_budget"]]).tobytes())
            digest.update(text.reset(options={"task": task})[0].encode())
    return digest.hexdigest()[:16]


@pytest.mark.parametrize("env_id", rla_gym.ENV_IDS)
def test_generated_worlds_stay_what_they_were(env_id: str) -> None:
    assert _world_digest(env_id) == WORLD_DIGESTS[env_id]


def _oracle_step(envs: Any, info: dict[str, Any]) -> tuple[Any, ...]:
    """One step with each sub-env's first oracle command (command 0 where it reports none)."""
    commands = [np.flatnonzero(m)[0] if m.any() else 0 for m in info["oracle_mask"]]
    return envs.step(np.array(commands, dtype=np.int64))


@pytest.mark.parametrize("array_state", [False, True])
def test_a_partial_reset_leaves_a_pending_autoreset_pending(array_state: bool) -> None:
    """NEXT_STEP: a sub-env that finished and is not in ``reset_mask`` still starts its next
    episode on the next step instead of stepping its finished one."""
    envs = gym.make_vec("RLA-TextNav-v0", num_envs=2, difficulty=0.3, array_state=array_state)
    envs.set_tasks([Task("RLA-TextNav-v0", 0.3, 5)] * 2)
    _, info = envs.reset(seed=0)
    optimal = int(info["optimal_len"][0])
    for _ in range(optimal):
        _, _, term, _, info = _oracle_step(envs, info)
    assert term.tolist() == [True, True]  # both on the same task, led by the oracle
    _, info = envs.reset(options={"reset_mask": np.array([False, True])})
    assert info["_distance"].tolist() == [False, True]
    _, reward, term, trunc, info = _oracle_step(envs, info)
    assert reward.tolist() == [0.0, 0.0] and not (term | trunc).any()
    assert info["distance"].tolist() == [optimal, optimal - 1]  # sub-env 0 only started again
    assert info["progress"].tolist() == [0, 1]


@pytest.mark.parametrize("array_state", [False, True])
def test_reset_mask_must_be_bools(array_state: bool) -> None:
    envs = gym.make_vec("RLA-TextNav-v0", num_envs=2, array_state=array_state)
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"options\['reset_mask'\] must be a bool array of shape \(2,\)"):
        envs.reset(options={"reset_mask": np.array([0, 1])})


@pytest.mark.parametrize("array_state", [False, True])
def test_returned_observations_are_not_overwritten_by_later_steps(array_state: bool) -> None:
    envs = gym.make_vec("RLA-TextNav-v0", num_envs=2, difficulty=0.3, array_state=array_state)
    obs, info = envs.reset(seed=0)
    kept = {key: value.copy() for key, value in obs.items()}
    for _ in range(3):
        _, _, _, _, info = _oracle_step(envs, info)
    assert all(np.array_equal(obs[key], kept[key]) for key in kept)


def test_pinning_again_keeps_tasks_and_checks_new_ones() -> None:
    """set_attr("pinned_task") passes over sub-envs already pinned to the task (adapters re-pin
    every step); a changed entry is still checked and applied."""
    envs = gym.make_vec("RLA-TextNav-v0", num_envs=3, difficulty=0.3)
    tasks = [Task("RLA-TextNav-v0", 0.1, 1), None, Task("RLA-TextNav-v0", 0.9, 2)]
    envs.set_attr("pinned_task", tasks)
    envs.set_attr("pinned_task", tasks)
    assert envs.get_attr("pinned_task") == tuple(tasks)
    with pytest.raises(TypeError, match="tasks\\[1\\] must be an rla_gym.Task"):
        envs.set_attr("pinned_task", [tasks[2], "easy", tasks[2]])
    with pytest.raises(ValueError, match="tasks\\[1\\] is for 'RLA-GUI-v1'"):
        envs.set_attr("pinned_task", [tasks[2], Task("RLA-GUI-v1", 0.2, 3), tasks[2]])
    assert envs.get_attr("pinned_task") == tuple(tasks)  # refused whole: no sub-env changed
    envs.set_attr("pinned_task", [tasks[2], None, None])
    _, info = envs.reset(seed=0)
    assert info["difficulty"].tolist() == [0.9, 0.3, 0.9] and info["task_seed"][0] == 2


def test_set_attr_takes_a_tuple_as_one_value_per_sub_env() -> None:
    envs = gym.make_vec("RLA-TextNav-v0", num_envs=2)
    tasks = (Task("RLA-TextNav-v0", 0.1, 1), Task("RLA-TextNav-v0", 0.9, 2))
    envs.set_attr("pinned_task", tasks)
    assert envs.get_attr("pinned_task") == tasks
    _, info = envs.reset(seed=0)
    assert info["task_seed"].tolist() == [1, 2] and info["difficulty"].tolist() == [0.1, 0.9]


@pytest.mark.parametrize("array_state", [False, True])
def test_vector_resets_refuse_what_would_go_wrong(array_state: bool) -> None:
    """A first reset that leaves sub-envs unstarted is refused (stepping one "succeeded" under
    the array state); bad seeds and difficulties are named; ``reset(seed=s)`` seeds the vector
    env's own ``np_random`` as Gymnasium's do."""
    envs = gym.make_vec("RLA-TextNav-v0", num_envs=2, array_state=array_state)
    with pytest.raises(ValueError, match="the first reset resets every sub-env"):
        envs.reset(options={"reset_mask": np.array([True, False])})
    for seed in (1.5, "a"):
        with pytest.raises(TypeError, match="seed must be an integer, one per sub-env, or None"):
            envs.reset(seed=seed)  # type: ignore[arg-type]
    envs.reset(seed=3)
    assert envs.np_random_seed == 3
    envs.unwrapped.set_difficulties(np.array(0.5))  # a 0-d array is a scalar
    with pytest.raises(TypeError, match="tasks must be a sequence"):
        envs.unwrapped.set_tasks(None)  # type: ignore[arg-type]
