"""TextNav specifics: the oracle is exact, knobs are monotone, text and tokens agree."""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
from bfs_reference import bfs_distance
from env_checks import budget_cell, check_knob_table, check_oracle_by_search, short

from rla_gym.envs.textnav import TextNavEnv, textnav_knobs
from rla_gym.evaluation import random_agent


@pytest.mark.parametrize("difficulty", [0.0, 0.3, 0.5, 0.7, 0.85])
def test_oracle_distance_and_actions_match_brute_force_search(difficulty: float) -> None:
    rng = np.random.default_rng(int(difficulty * 100))
    near = 12 if difficulty < 0.6 else 8
    checked = check_oracle_by_search(
        lambda: TextNavEnv(difficulty=difficulty), bfs_distance, seeds=20, steps=40, near=near, rng=rng
    )
    assert checked >= 25


def test_knobs_are_monotone_in_difficulty() -> None:
    grid = [textnav_knobs(d) for d in np.linspace(0, 1, 101)]
    levels = {"live": 0, "route": 1, "half route": 2, "none": 3}
    for a, b in itertools.pairwise(grid):
        assert a.rooms <= b.rooms and a.route_min <= b.route_min and a.route_max <= b.route_max
        assert a.distractors <= b.distractors and a.closed_door_prob <= b.closed_door_prob
        assert a.locked_door <= b.locked_door and a.bring_prob <= b.bring_prob
        assert levels[a.directions] <= levels[b.directions] and a.name_exits >= b.name_exits
        assert a.budget_factor >= b.budget_factor and a.budget_slack >= b.budget_slack
    assert (grid[0].rooms, grid[-1].rooms) == (4, 64)


@pytest.mark.parametrize("difficulty", [0.0, 0.3, 0.6, 0.8, 1.0])
def test_generated_worlds_follow_the_knobs(difficulty: float) -> None:
    knobs = textnav_knobs(difficulty)
    env = TextNavEnv(difficulty=difficulty)
    for seed in range(30):
        env.reset(seed=seed)
        assert len(env._cells) == knobs.rooms == len(set(env._cells))
        assert knobs.route_min <= env._up[env._goal_room].bit_count() <= knobs.route_max
        assert (env._locked != 0) == knobs.locked_door
        assert len(env._items) == knobs.distractors + (env._goal_item >= 0) + (env._key >= 0)
        for room, exits in enumerate(env._neighbors):  # exits are symmetric and follow the grid
            for direction, other in enumerate(exits):
                if other >= 0:
                    assert env._neighbors[other][(direction + 2) % 4] == room


def test_text_and_tokens_describe_the_same_state() -> None:
    env = gym.make("RLA-TextNav-v0", difficulty=0.3, obs_mode="text")
    text, _ = env.reset(seed=2)
    words = env.unwrapped.decode_tokens(env.unwrapped._tokens())
    for word in set(words) - {"<none>", "<unknown>", "go", "bring", "wall", "open"}:
        assert word in text, word


def test_transcript_example_at_low_difficulty() -> None:
    env = gym.make("RLA-TextNav-v0", difficulty=0.0, obs_mode="text")
    text, info = env.reset(seed=0)
    assert text.startswith("Goal: go to the ") and "Directions: in the " in text and "Exits: " in text
    for _ in range(info["optimal_len"]):
        text, reward, terminated, _, info = env.step(np.flatnonzero(info["oracle_mask"]).tolist()[0])
    assert terminated and reward > 0 and info["is_success"]


def test_locked_door_opens_only_with_its_key() -> None:
    env = TextNavEnv(difficulty=1.0)
    rng = np.random.default_rng(0)
    unlocked = 0
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        assert env._locked
        done = False
        while not done:
            unlock_ok = info["action_mask"][8:12].any()
            assert not unlock_ok or env._key_loc == -1  # unlock is admissible only holding the key
            action = (
                np.flatnonzero(info["oracle_mask"]).tolist()[0]
                if rng.random() < 0.8
                else random_agent(obs, info, rng)
            )
            unlocked += 8 <= action < 12
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        assert not info["is_success"] or env._locked == 0  # the lock is on the route
    assert unlocked >= 20


def test_rgb_array_render_is_a_map() -> None:
    env = gym.make("RLA-TextNav-v0", difficulty=0.5, render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert (frame == (60, 90, 230)).all(axis=2).any()  # the agent's room is drawn
    ansi = gym.make("RLA-TextNav-v0", render_mode="ansi", obs_mode="text")
    text, _ = ansi.reset(seed=0)
    assert ansi.render() == text


def _expected_cells(d: float) -> dict[str, str]:
    k = textnav_knobs(d)
    return {
        "rooms": str(k.rooms),
        "route length band": f"{k.route_min}-{k.route_max}",
        "dead-end rooms": f"{k.rooms - k.route_max - 1}-{k.rooms - k.route_min - 1}",
        "distractor objects": str(k.distractors),
        "closed-door probability": short(k.closed_door_prob),
        "locked door": "yes" if k.locked_door else "no",
        'share of "bring"': short(k.bring_prob),
        "goal detail": k.directions,
        "exit descriptions": "yes" if k.name_exits else "no",
        "step budget": budget_cell(k),
    }


def test_docstring_knob_table_matches_the_knob_function() -> None:
    check_knob_table(TextNavEnv.__doc__ or "", {d: _expected_cells(d) for d in (0.0, 0.25, 0.5, 0.75, 1.0)})
