"""RLA-GUI's array-state vector env runs exactly what the lean loop (and so single envs) runs."""

from __future__ import annotations

import random

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from vector_checks import (
    AUTORESET_AND_OBS_MODES,
    array_and_lean,
    check_resets_and_tasks_alike,
    check_shared_tasks_generated_once,
    oracle_led_actions,
    step_alike_at_every_difficulty,
)

from rla_gym.envs.gui import GUIEnv
from rla_gym.envs.gui.app import _sample, _shuffle
from rla_gym.envs.gui.layout import NODE_OPENER, OK_, TOKEN_LENGTH, WAIT_
from rla_gym.envs.gui.vector import GUIVectorEnv, GUIVectorEnvV1
from rla_gym.vector import RLAVectorEnv

ENV_ID = "RLA-GUI-v0"
#: Both versions (v1 differs in one knob: its dialogs need OK from d = 0.1) for the tests that step.
VERSIONS = pytest.mark.parametrize(
    ("env_id", "array_cls"), [(ENV_ID, GUIVectorEnv), ("RLA-GUI-v1", GUIVectorEnvV1)], ids=["v0", "v1"]
)
N = 22  # difficulties 0, 0.05, ..., 1: open dialog / menus / nothing, instant apply, scrolling, 1-3 goals
ACTIONS = len(GUIEnv.action_names)


def _actions(oracles: np.ndarray, masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Oracle-led, and often inadmissible (a flagged no-op) where not the oracle's."""
    return oracle_led_actions(oracles, masks, rng, admissible_up_to=0.93)


def _pair(
    autoreset: AutoresetMode,
    obs_mode: str = "dict",
    n: int = N,
    env_id: str = ENV_ID,
    array_cls: type = GUIVectorEnv,
) -> tuple[RLAVectorEnv, RLAVectorEnv]:
    return array_and_lean(env_id, n, array_cls, difficulty=0.5, autoreset_mode=autoreset, obs_mode=obs_mode)


@VERSIONS
@pytest.mark.parametrize(("autoreset", "obs_mode"), AUTORESET_AND_OBS_MODES)
def test_gui_array_state_env_matches_the_lean_loop_at_every_difficulty(
    autoreset: AutoresetMode, obs_mode: str, env_id: str, array_cls: type
) -> None:
    ours, theirs = _pair(autoreset, obs_mode, env_id=env_id, array_cls=array_cls)
    assert type(ours) is array_cls and ours.envs[0].env_id == env_id
    outcomes: list[int] = []
    invalid = dialogs = 0
    for _, info, ended in step_alike_at_every_difficulty(ours, theirs, 400, _actions):
        outcomes += ended.tolist()
        invalid += int(info["invalid_action"].sum())
        dialogs += int(info["action_mask"][:, OK_].sum())  # OK is admissible in every dialog
    assert outcomes.count(1) >= 150 and outcomes.count(-1) >= 10  # successes and budget cuts
    assert invalid >= 100 and dialogs >= 1000  # no-ops and dialog steps were exercised


def test_partial_resets_seeds_options_and_per_env_tasks_match_the_lean_loop() -> None:
    check_resets_and_tasks_alike(*_pair(AutoresetMode.NEXT_STEP), ENV_ID, _actions)


def test_applications_read_into_arrays_are_the_single_envs() -> None:
    """Menus, dialogs, controls, goals and the oracle's tables of 440 generated applications."""
    envs = GUIVectorEnv(N * 10, difficulty=0.5)
    envs.set_difficulties(np.repeat(np.round(np.linspace(0.0, 1.0, N), 3), 10))
    for seed in range(2):
        _, info = envs.reset(seed=1000 * seed)
        for i, env in enumerate(envs.envs):
            nodes = len(env._n_kind)
            assert envs._kind[i, :nodes].tolist() == env._n_kind
            assert envs._opens[i, :nodes].tolist() == env._n_dialog
            for node, children in enumerate(env._n_children):
                assert envs._children[i, node, : len(children)].tolist() == children
                assert [envs._slot[i, c] for c in children] == list(range(len(children)))
            assert envs._top[i, : len(env._top)].tolist() == env._top
            for dialog in range(env._knobs.goal_dialogs):
                path = env._d_path[dialog]
                assert envs._d_path[i, dialog, : len(path)].tolist() == list(path)
                assert envs._d_len[i, dialog] == len(path)
                opener = envs._d_opener[i, dialog]
                assert env._n_kind[opener] == NODE_OPENER and env._n_dialog[opener] == dialog
                assert opener in env._n_children[path[-1]]
            controls = len(env._c_kind)
            assert envs._c_kind[i, :controls].tolist() == env._c_kind
            assert envs._committed[i, :controls].tolist() == env._committed
            assert envs._control_slot[i, :controls, 1:].tolist() == [list(c) for c in env._c_label]
            assert [envs._goal_of[i, c] for c in env._g_control] == list(range(len(env._g_control)))
            assert (envs._goal_of[i, :controls] >= 0).sum() == len(env._g_control)
            assert envs._g_page[i, : len(env._g_control)].tolist() == [env._c_page[c] for c in env._g_control]
            assert envs._d_mask[i, : env._knobs.dialogs].tolist() == env._d_mask
            for cw in range(1 << len(env._g_control)):
                assert envs._rest[i, cw] == env._rest(cw)
            distance = env._distance()  # the bare env still holds the first state
            assert info["distance"][i] == distance and info["step_budget"][i] == env._step_budget(distance)


@VERSIONS
def test_oracle_commands_reach_success_within_the_optimal_length(env_id: str, array_cls: type) -> None:
    """Following only the oracle's commands, every task ends in exactly ``optimal_len`` steps."""
    envs = array_cls(N * 3, difficulty=0.5, autoreset_mode=AutoresetMode.SAME_STEP)
    envs.set_difficulties(np.repeat(np.round(np.linspace(0.0, 1.0, N), 3), 3))
    _, info = envs.reset(seed=9)
    optimal, steps = info["optimal_len"].copy(), np.zeros(N * 3, dtype=np.int64)
    rng = np.random.default_rng(1)
    ended = 0
    for _ in range(200):
        oracle = info["oracle_mask"]
        assert oracle.any(axis=1).all() and not oracle[:, WAIT_].any()
        assert not (oracle & ~info["action_mask"].astype(bool)).any()
        _, reward, term, trunc, info = envs.step((rng.random(oracle.shape) * oracle).argmax(axis=1))
        steps += 1
        assert np.array_equal(term, reward == 1.0) and not trunc.any()
        for i in np.flatnonzero(term):
            assert steps[i] == optimal[i]
            ended += 1
        optimal[term], steps[term] = info["optimal_len"][term], 0
    assert ended >= 500


def test_construction_modes_and_bad_input() -> None:
    flat = gym.make_vec(ENV_ID, 3, obs_mode="flat", difficulty=0.7, array_state=True)
    assert type(flat) is GUIVectorEnv and type(gym.make_vec("RLA-GUI-v1", 128)) is GUIVectorEnvV1
    obs, info = flat.reset(seed=2)
    assert obs.shape == (3, TOKEN_LENGTH + ACTIONS) and obs.dtype == np.float32
    assert np.array_equal(obs[:, TOKEN_LENGTH:], info["action_mask"])
    assert type(gym.make_vec(ENV_ID, 3, obs_mode="text", array_state=True)) is RLAVectorEnv
    assert type(gym.make_vec(ENV_ID, 3, array_state=False)) is RLAVectorEnv
    with pytest.raises(ValueError, match="'text' uses RLAVectorEnv"):
        GUIVectorEnv(2, obs_mode="text")
    envs = GUIVectorEnv(2, oracle_info=False)
    with pytest.raises(RuntimeError, match="before reset"):
        envs.step(np.zeros(2, dtype=np.int64))
    _, info = envs.reset(seed=0)
    assert "oracle_mask" not in info and info["_distance"].all()
    _, _, _, _, info = envs.step(np.array([WAIT_] * 2))
    assert "oracle_mask" not in info and not info["invalid_action"].any()
    with pytest.raises(ValueError, match=r"actions must lie in \[0, "):
        envs.step(np.array([0, 99]))
    assert np.array_equal(np.stack(envs.call("action_masks")), envs.action_masks())


@VERSIONS
def test_sub_envs_pinned_to_one_task_generate_it_once_and_copy_it(env_id: str, array_cls: type) -> None:
    ours, theirs = _pair(AutoresetMode.SAME_STEP, n=8, env_id=env_id, array_cls=array_cls)
    check_shared_tasks_generated_once(ours, theirs, env_id, 200, _actions)


def test_inlined_sample_and_shuffle_draw_as_the_standard_library() -> None:
    """The GUI generator's ``_sample`` and ``_shuffle`` give what ``random.Random.sample`` and
    ``shuffle`` give, leaving the generator in the same state (both of its branches of sample)."""
    for seed in range(200):
        ours, theirs = random.Random(seed), random.Random(seed)
        for population, k in ((range(8), 3), (tuple("abcdefgh"), 8), (range(225), 16), (range(225), 160)):
            assert _sample(ours.getrandbits, population, k) == theirs.sample(population, k)
        items, expected = list(range(seed % 9)), list(range(seed % 9))
        _shuffle(ours.getrandbits, items)
        theirs.shuffle(expected)
        assert items == expected and ours.random() == theirs.random()
