"""RLA-Reason's array-state vector env runs exactly what the lean loop (and so single envs) runs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from vector_checks import (
    AUTORESET_AND_OBS_MODES,
    array_and_lean,
    check_resets_and_tasks_alike,
    oracle_led_actions,
    same,
    same_info,
    step_alike_at_every_difficulty,
)

from rla_gym.envs.reason import FAMILIES, ROWS, WRITE_, ReasonEnv
from rla_gym.envs.reason.tasks import BUFFER, TOK
from rla_gym.envs.reason.vector import ReasonVectorEnv
from rla_gym.vector import RLAVectorEnv

ENV_ID = "RLA-Reason-v0"
ACTIONS = len(ReasonEnv.action_names)
N = 22  # difficulties 0, 0.05, ..., 1: every family, operator set, digit count and budget


def _actions(oracles: np.ndarray, masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Oracle-led, a little more often than the default."""
    return oracle_led_actions(oracles, masks, rng, oracle_up_to=0.75)


@pytest.mark.parametrize(("autoreset", "obs_mode"), AUTORESET_AND_OBS_MODES)
def test_reason_array_state_env_matches_the_lean_loop_at_every_difficulty(
    autoreset: AutoresetMode, obs_mode: str
) -> None:
    ours, theirs = array_and_lean(
        ENV_ID, N, ReasonVectorEnv, difficulty=0.5, autoreset_mode=autoreset, obs_mode=obs_mode
    )
    outcomes: list[int] = []
    invalid = rejected = 0
    for obs, info, ended in step_alike_at_every_difficulty(ours, theirs, 600, _actions):
        outcomes += ended.tolist()
        invalid += int(info["invalid_action"].sum())
        tokens = obs["tokens"] if obs_mode == "dict" else obs[:, : ReasonEnv.token_length]
        rejected += int((tokens[:, -1] == TOK["rejected"]).sum())
    assert outcomes.count(1) >= 200 and outcomes.count(-1) >= 10  # successes and budget cuts
    assert invalid >= 100 and rejected >= 50  # no-ops and wrong writes were exercised


def test_partial_resets_seeds_options_and_per_env_tasks_match_the_lean_loop() -> None:
    check_resets_and_tasks_alike(
        *array_and_lean(ENV_ID, N, ReasonVectorEnv, difficulty=0.5), ENV_ID, _actions
    )


def _code(text: str) -> int:
    """The prefix code of ``text``, written out independently of the env's table."""
    return sum(("0123456789-".index(c) + 1) * 12**i for i, c in enumerate(text))


def test_worksheets_read_into_arrays_are_the_single_envs() -> None:
    """Codes, oracle commands, dependencies and budgets of 2,200 generated worksheets."""
    envs = ReasonVectorEnv(N * 10, difficulty=0.5)
    envs.set_difficulties(np.repeat(np.round(np.linspace(0.0, 1.0, N), 3), 10))
    families = set()
    for seed in range(10):
        _, info = envs.reset(seed=1000 * seed)
        for i, env in enumerate(envs.envs):
            families.add(env._family)
            rows = env._rows
            for r, text in enumerate(env._strings):
                codes = [_code(text[:j]) if j <= len(text) else -1 for j in range(BUFFER + 1)]
                assert envs._codes[i, :, r].tolist() == codes and envs._full[i, r] == _code(text)
                commands = ["0123456789-".index(c) for c in text] + [WRITE_ + r]
                flat = [i * ACTIONS + c for c in commands] + [N * 10 * ACTIONS] * (BUFFER + 1 - len(commands))
                assert envs._target[i, :, r].tolist() == flat  # indices into the flat oracle array
            assert (envs._codes[i, :, len(rows) :] == -1).all()
            assert envs._deps[i, : len(rows)].tolist() == [sum(1 << d for d in row.deps) for row in rows]
            assert not envs._valid[i, len(rows) :].any() and envs._valid[i, : len(rows)].all()
            assert envs._ready[i].tolist() == [r in env._ready for r in range(ROWS)]
            assert envs._maxlen[i] == env._maxlen and envs._left[i] == env._left
            assert info["step_budget"][i] == env._step_budget(env._left)
    assert families == set(FAMILIES)


def test_construction_modes_and_bad_input() -> None:
    flat = gym.make_vec(ENV_ID, 3, obs_mode="flat", difficulty=0.7, array_state=True)
    assert isinstance(flat, ReasonVectorEnv)
    obs, info = flat.reset(seed=2)
    assert obs.shape == (3, ReasonEnv.token_length + 23) and obs.dtype == np.float32
    assert np.array_equal(obs[:, -23:], info["action_mask"])
    assert type(gym.make_vec(ENV_ID, 3, obs_mode="text", array_state=True)) is RLAVectorEnv
    with pytest.raises(ValueError, match="'text' uses RLAVectorEnv"):
        ReasonVectorEnv(2, obs_mode="text")
    envs = ReasonVectorEnv(2, oracle_info=False)
    _, info = envs.reset(seed=0)
    assert "oracle_mask" not in info and info["_distance"].all()
    _, _, _, _, info = envs.step(np.array([ReasonEnv.noop_action] * 2))
    assert "oracle_mask" not in info and not info["invalid_action"].any()
    with pytest.raises(ValueError, match=r"actions must lie in \[0, "):
        envs.step(np.array([0, 99]))
    assert np.array_equal(np.stack(envs.call("action_masks")), envs.action_masks())


def test_without_the_oracle_info_the_steps_are_the_lean_loops() -> None:
    kwargs = {"difficulty": 0.5, "oracle_info": False}
    ours = ReasonVectorEnv(N, **kwargs)
    theirs = gym.make_vec(ENV_ID, num_envs=N, array_state=False, **kwargs)
    levels = np.round(np.linspace(0.0, 1.0, N), 3)
    ours.set_difficulties(levels)
    theirs.set_difficulties(levels)
    (obs_a, info_a), (obs_b, info_b) = ours.reset(seed=3), theirs.reset(seed=3)
    rng = np.random.default_rng(4)
    none = np.zeros((N, ACTIONS), dtype=np.int8)
    for _ in range(150):
        assert same(obs_a, obs_b) and "oracle_mask" not in info_a
        same_info(info_a, info_b)
        actions = _actions(none, obs_b["action_mask"], rng)
        obs_a, *_, info_a = ours.step(actions)
        obs_b, *_, info_b = theirs.step(actions)
