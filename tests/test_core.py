"""RLAEnv plumbing: tasks, difficulty validation, options, bad inputs."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from rla_gym import Task, check_difficulty
from rla_gym.core import HELDOUT_SEED_START
from rla_gym.envs import TextNavEnv

BAD_DIFFICULTIES = [
    (float("nan"), ValueError),
    (-0.1, ValueError),
    (1.5, ValueError),
    (math.inf, ValueError),
    (None, TypeError),
    ("0.5", TypeError),
    (True, TypeError),
    ([0.5], TypeError),
]


@pytest.mark.parametrize(("value", "error"), BAD_DIFFICULTIES)
def test_bad_difficulty_is_rejected_everywhere_naming_the_value(env_id: str, value, error) -> None:
    pattern = "difficulty.*" + (repr(value).replace("[", r"\[").replace("]", r"\]"))
    with pytest.raises(error, match=pattern):
        gym.make(env_id, difficulty=value)
    env = gym.make(env_id, difficulty=0.2)
    with pytest.raises(error, match=pattern):
        env.unwrapped.set_difficulty(value)
    with pytest.raises(error, match=pattern):
        env.reset(options={"difficulty": value})
    with pytest.raises(error, match=pattern):
        Task(env_id, value, 0)
    assert env.unwrapped.difficulty == 0.2  # nothing half-applied


def test_check_difficulty_accepts_numpy_and_ints() -> None:
    assert check_difficulty(np.float32(0.5)) == 0.5
    assert check_difficulty(1) == 1.0 and isinstance(check_difficulty(1), float)


@pytest.mark.parametrize("action", [-1, 24, 10**9, np.int64(-3)])
def test_action_outside_the_space_raises_value_error(action) -> None:
    env = gym.make("RLA-TextNav-v0")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=re.escape(f"got {action!r}")):
        env.step(action)


@pytest.mark.parametrize("action", [1.0, "go north", None, True, np.array([1, 2])])
def test_action_of_wrong_type_raises_type_error(action) -> None:
    env = gym.make("RLA-TextNav-v0")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="action must be an integer"):
        env.step(action)


def test_numpy_actions_act_as_their_integer() -> None:
    numpy_env, int_env = gym.make("RLA-TextNav-v0"), gym.make("RLA-TextNav-v0")
    numpy_env.reset(seed=0)
    _, info = int_env.reset(seed=0)
    first = int(np.flatnonzero(info["oracle_mask"])[0])
    for as_numpy, as_int in ((np.int64(first), first), (np.array(23), 23)):
        a, b = numpy_env.step(as_numpy), int_env.step(as_int)
        assert np.array_equal(a[0]["tokens"], b[0]["tokens"]) and a[1:4] == b[1:4]
        assert a[4]["progress"] == b[4]["progress"] and a[4]["distance"] == b[4]["distance"]


def test_masked_action_is_a_flagged_no_op() -> None:
    env = gym.make("RLA-TextNav-v0", difficulty=0.0)
    obs, info = env.reset(seed=0)
    bad = int(np.flatnonzero(info["action_mask"] == 0)[0])
    obs2, reward, terminated, truncated, info2 = env.step(bad)
    assert info2["invalid_action"] and info2["progress"] == 0 and reward == 0.0
    assert np.array_equal(obs["tokens"], obs2["tokens"])


def test_step_before_reset_and_after_the_end_raise() -> None:
    env = gym.make("RLA-TextNav-v0").unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    obs, info = env.reset(seed=0)
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(23)  # "look" until the budget runs out
        done = terminated or truncated
    assert truncated and info["outcome"] == -1
    with pytest.raises(RuntimeError, match="reset"):
        env.step(23)


def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="obs_mode.*'pixels'"):
        gym.make("RLA-TextNav-v0", obs_mode="pixels")
    with pytest.raises(ValueError, match="render_mode.*'video'"):
        TextNavEnv(render_mode="video")


def test_conflicting_or_malformed_options_change_nothing() -> None:
    env = gym.make("RLA-TextNav-v0", difficulty=0.2)
    task = env.unwrapped.make_task(0.5, 3)
    with pytest.raises(ValueError, match="either 'task' or 'difficulty'"):
        env.reset(options={"task": task, "difficulty": 0.9})
    with pytest.raises(TypeError, match="options must be a dict"):
        env.reset(options=["difficulty"])
    with pytest.raises(ValueError, match="got 9"):
        env.reset(options={"difficulty": 9})
    assert env.unwrapped.pinned_task is None and env.unwrapped.difficulty == 0.2


def test_float32_and_rounding_noise_name_the_same_task() -> None:
    assert (
        Task("RLA-TextNav-v0", np.float32(0.7), 1)
        == Task("RLA-TextNav-v0", 0.1 + 0.6, 1)
        == Task("RLA-TextNav-v0", 0.7, 1)
    )
    env = gym.make("RLA-TextNav-v0", difficulty=np.float32(0.7))
    assert env.reset(seed=0)[1]["difficulty"] == 0.7 and env.unwrapped._locked  # the d >= 0.7 lock exists


def test_action_masks_before_reset_raises() -> None:
    with pytest.raises(RuntimeError, match="before reset"):
        TextNavEnv().action_masks()


def test_evaluate_restores_the_envs_own_task() -> None:
    from rla_gym.evaluation import evaluate, heldout_seeds, oracle_agent

    env = gym.make("RLA-TextNav-v0", difficulty=0.3)
    evaluate(env, oracle_agent, 0.9, heldout_seeds(3))
    assert env.unwrapped.pinned_task is None and env.unwrapped.difficulty == 0.3
    task = env.unwrapped.make_task(0.4, 8)
    env.unwrapped.set_task(task)
    evaluate(env, oracle_agent, 0.9, heldout_seeds(3))
    assert env.unwrapped.pinned_task == task


def test_evaluate_counts_failed_episodes() -> None:
    from rla_gym.evaluation import evaluate, heldout_seeds, oracle_agent, random_agent

    env = gym.make("RLA-TextNav-v0")
    assert evaluate(env, oracle_agent, 0.1, heldout_seeds(20)).success_rate == 1.0
    result = evaluate(env, random_agent, 0.1, heldout_seeds(20))  # random commands fail some
    assert result.episodes == 20 and 0.0 < result.success_rate < 1.0


def test_bad_tasks_and_options() -> None:
    env = gym.make("RLA-TextNav-v0")
    with pytest.raises(ValueError, match="not 'RLA-TextNav-v0'"):
        env.unwrapped.set_task(Task("RLA-Other-v0", 0.5, 1))
    with pytest.raises(TypeError, match="rla_gym.Task"):
        env.reset(options={"task": {"difficulty": 0.5, "seed": 1}})
    with pytest.raises(ValueError, match="unknown reset options.*'level'"):
        env.reset(options={"level": 3})
    for seed, error in [(-1, ValueError), (2**31, ValueError), (1.5, TypeError), ("7", TypeError)]:
        with pytest.raises(error, match="task seed"):
            Task("RLA-TextNav-v0", 0.5, seed)


def test_task_identity_is_stable_and_reproducible() -> None:
    a, b = Task("RLA-TextNav-v0", 0.5, 7), Task("RLA-TextNav-v0", np.float64(0.5), np.int64(7))
    assert a == b and a.task_id == b.task_id == "a28add869758e71c"
    assert len({Task("RLA-TextNav-v0", d, s).task_id for d in (0.1, 0.2) for s in range(50)}) == 100
    env = gym.make("RLA-TextNav-v0", obs_mode="text")
    first, info1 = env.reset(seed=1, options={"task": a})
    env.reset(seed=99)  # the pinned task persists across resets
    again, info2 = env.reset(seed=5)
    assert first == again and info1["task_key"] == info2["task_key"] == a.key


def test_task_hash_is_its_key_in_every_process() -> None:
    """Tasks key dicts and sets (curricula, pinned groups): a task hashes by its key, the same in
    a process with another string-hash salt and after pickling, and equal tasks hash alike."""
    import pickle

    a = Task("RLA-TextNav-v0", 0.5, 7)
    assert hash(a) == a.key == hash(Task("RLA-TextNav-v0", np.float32(0.5), 7))
    zero, minus = Task("RLA-TextNav-v0", 0.0, 7), Task("RLA-TextNav-v0", -0.0, 7)
    assert zero == minus and hash(zero) == hash(minus) and len({zero, minus}) == 1
    assert a.key == int(a.task_id, 16) >> 4 and "_key" not in repr(a)
    copy = pickle.loads(pickle.dumps(a))
    assert copy == a and hash(copy) == hash(a) and {a: 1}[copy] == 1
    code = "from rla_gym import Task; print(hash(Task('RLA-TextNav-v0', 0.5, 7)))"
    for salt in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": salt},
        )  # fmt: skip
        assert int(out.stdout) == a.key


def test_difficulty_and_task_options_persist_and_unpin() -> None:
    env = gym.make("RLA-TextNav-v0", difficulty=0.1)
    _, info = env.reset(seed=0, options={"difficulty": 0.6})
    assert info["difficulty"] == 0.6 and env.unwrapped.difficulty == 0.6
    _, info = env.reset()
    assert info["difficulty"] == 0.6
    task = env.unwrapped.make_task(0.3, 11)
    env.unwrapped.set_task(task)
    assert env.unwrapped.difficulty == 0.3
    assert env.reset()[1]["task_key"] == task.key
    env.unwrapped.set_difficulty(0.4)  # unpins
    ids = {env.reset()[1]["task_key"] for _ in range(5)}
    assert task.key not in ids and len(ids) == 5


def test_unpinned_resets_never_draw_heldout_seeds() -> None:
    env = gym.make("RLA-TextNav-v0")
    env.reset(seed=0)
    assert all(
        env.reset()[0] is not None and env.unwrapped.task.seed < HELDOUT_SEED_START for _ in range(200)
    )


def test_registration_records_kwargs_and_module_prefix_works() -> None:
    env = gym.make("RLA-TextNav-v0", difficulty=0.8, obs_mode="flat")
    assert env.spec.kwargs == {"difficulty": 0.8, "obs_mode": "flat"}
    assert env.unwrapped.difficulty == 0.8 and env.observation_space.shape == (69 + 24,)
    assert gym.make("rla_gym:RLA-TextNav-v0").unwrapped.env_id == "RLA-TextNav-v0"


def test_module_prefix_works_without_a_prior_import() -> None:
    code = "import gymnasium as gym; print(gym.make('rla_gym:RLA-TextNav-v0').unwrapped.env_id)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "RLA-TextNav-v0"


def test_wrapped_env_does_not_forward_attributes() -> None:
    env = gym.make("RLA-TextNav-v0")
    with pytest.raises(AttributeError):
        _ = env.difficulty  # reach the base through env.unwrapped or get_wrapper_attr
    assert env.get_wrapper_attr("difficulty") == 0.5


def test_a_refused_reset_leaves_the_random_state_as_it_was() -> None:
    """Options are checked before the seed is applied: a reset refused for its options does not
    reseed the env (the next task came from the refused call's seed)."""
    env = gym.make("RLA-TextNav-v0")
    env.reset(seed=1)
    expected = env.reset()[1]["task_seed"]
    env.reset(seed=1)
    with pytest.raises(ValueError, match="difficulty"):
        env.reset(seed=99, options={"difficulty": 9})
    assert env.reset()[1]["task_seed"] == expected
