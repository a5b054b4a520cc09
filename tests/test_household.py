"""Household specifics: the oracle is exact, knobs are monotone and bite, text and tokens agree."""

from __future__ import annotations

import dataclasses
import itertools

import gymnasium as gym
import numpy as np
import pytest
from env_checks import budget_cell, check_knob_table, check_oracle_by_search, short
from household_reference import bfs_distance

from rla_gym.envs.household import HouseholdEnv
from rla_gym.envs.household.catalog import (
    ACTION_NAMES,
    CLEAN_,
    COLORS,
    COOL_,
    DESK,
    FAMILIES,
    FRIDGE,
    GO_,
    HEAT_,
    KINDS,
    MAX_OBJECTS,
    MICROWAVE,
    OPEN_,
    OPENABLE,
    PUT_,
    RECEPTACLES,
    SINK,
    TAKE_,
    USE_,
    household_knobs,
)
from rla_gym.evaluation import random_agent

LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _step(env: HouseholdEnv, name: str) -> tuple:
    return env.step(ACTION_NAMES.index(name))


def _hold(env: HouseholdEnv, obj: int) -> None:
    """Put ``obj`` in the agent's hand (test setup)."""
    env._contents[env._where[obj]].remove(obj)
    env._where[obj], env._held = -1, obj


BFS_CAPS = [(0.0, 12), (0.3, 10), (0.5, 8), (0.7, 7), (0.9, 6), (1.0, 6)]  # brute force is exponential


@pytest.mark.parametrize(("difficulty", "cap"), BFS_CAPS)
def test_oracle_distance_and_actions_match_brute_force_search(difficulty: float, cap: int) -> None:
    rng = np.random.default_rng(int(difficulty * 100))
    checked = check_oracle_by_search(  # walks closer sometimes off the path, too
        lambda: HouseholdEnv(difficulty=difficulty),
        bfs_distance,
        seeds=8,
        steps=40,
        near=cap,
        rng=rng,
        wander=0.3,
    )
    assert checked >= 40


def test_pick_two_oracle_matches_brute_force_from_the_start() -> None:
    env = HouseholdEnv(difficulty=0.9)
    checked = 0
    for seed in range(60):
        env.reset(seed=seed)
        if env._family == "two" and env._distance() <= 11:
            assert bfs_distance(env, 12) == env._distance()
            checked += 1
    assert checked >= 1


def test_knobs_are_monotone_in_difficulty() -> None:
    grid = [household_knobs(d) for d in np.linspace(0, 1, 101)]
    levels = {"live": 0, "start": 1, "none": 2}
    for a, b in itertools.pairwise(grid):
        assert a.rooms <= b.rooms and a.receptacles <= b.receptacles and a.objects <= b.objects
        assert a.max_per_receptacle <= b.max_per_receptacle and a.closed_prob <= b.closed_prob
        assert set(a.families) <= set(b.families) and levels[a.goal_detail] <= levels[b.goal_detail]
        assert a.budget_factor >= b.budget_factor and a.budget_slack >= b.budget_slack
    assert grid[0].families == ("put",) and grid[-1].families == FAMILIES
    assert (grid[0].receptacles, grid[-1].receptacles) == (2, len(RECEPTACLES))
    assert grid[-1].objects <= MAX_OBJECTS  # every object fits the take slots of one receptacle


@pytest.mark.parametrize("difficulty", [0.0, 0.3, 0.6, 0.8, 1.0])
def test_generated_worlds_follow_the_knobs(difficulty: float) -> None:
    knobs = household_knobs(difficulty)
    env = HouseholdEnv(difficulty=difficulty)
    families = set()
    for seed in range(40):
        env.reset(seed=seed)
        families.add(env._family)
        assert len(env._present) == knobs.receptacles and len(env._names) == knobs.objects
        assert len(env._room_recs) == knobs.rooms and all(env._room_recs)  # no empty room
        assert all(len(env._contents[r]) <= knobs.max_per_receptacle for r in env._present)
        assert all(env._rec_room[r] == 0 for r in (FRIDGE, MICROWAVE, SINK) if r in env._present)
        place = {"clean": SINK, "heat": MICROWAVE, "cool": FRIDGE, "examine": DESK}.get(env._family)
        assert place is None or place in env._present
        assert all(env._where[o] != env._target for o in env._goal)  # nothing is done at the start
        kinds = [kind for _, kind in env._names]
        assert len(set(env._names)) == len(env._names)
        if env._family == "two":
            assert kinds.count(kinds[0]) == 2 == len(env._goal)
        closed = [r for r in env._present if not env._open >> r & 1]
        assert all(OPENABLE >> r & 1 for r in closed)
        if knobs.closed_prob in (0.0, 1.0):
            openable = [r for r in env._present if OPENABLE >> r & 1]
            assert closed == (openable if knobs.closed_prob == 1.0 else [])
        assert env._at == -1 and env._held == -1
    assert families == set(knobs.families)


def test_transcript_example_at_low_difficulty() -> None:
    env = gym.make("RLA-Household-v0", difficulty=0.0, obs_mode="text")
    text, info = env.reset(seed=0)
    goal = env.unwrapped._goal_text()
    assert text.startswith(f"Your task is to: {goal}.") and "Hint: the " in text
    assert "in the middle of the room" in text and "You are holding: nothing." in text
    names = env.unwrapped.action_names
    for _ in range(info["optimal_len"]):
        action = np.flatnonzero(info["oracle_mask"]).tolist()[0]
        text, reward, terminated, _, info = env.step(action)
        if names[action] == "take object 1":
            assert "You are holding: a " in text and "Hint: you are holding the " in text
    assert terminated and reward > 0 and info["is_success"]


@pytest.mark.parametrize("difficulty", [0.1, 0.5, 1.0])
def test_text_and_tokens_describe_the_same_state(difficulty: float) -> None:
    env = HouseholdEnv(difficulty=difficulty, obs_mode="text")
    rng = np.random.default_rng(1)
    text, info = env.reset(seed=3)
    for _ in range(60):
        for word in set(env.decode_tokens(env._tokens())) - {"<none>"}:
            assert word in text, word
        action = (
            np.flatnonzero(info["oracle_mask"]).tolist()[0]
            if rng.random() < 0.5
            else random_agent(text, info, rng)
        )
        text, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            text, info = env.reset()


def test_closed_containers_hide_their_contents_until_opened() -> None:
    env = HouseholdEnv(difficulty=1.0, obs_mode="text")
    for seed in itertools.count():
        env.reset(seed=seed)
        boxes = [r for r in env._room_recs[env._room] if OPENABLE >> r & 1 and env._contents[r]]
        if boxes:
            break
    text, *_ = env.step(GO_ + boxes[0])
    assert "It is closed" in text and env._tokens()[29:32] == [1, 1, 1]  # no object shown
    assert env.vocab[env._tokens()[28]] == "closed"
    assert not env._mask_list[TAKE_] and env._mask_list[OPEN_]
    text, *_ = env.step(OPEN_)
    color, kind = env._names[env._contents[boxes[0]][0]]
    assert "(open)" in text and f"You see: a {COLORS[color]} {KINDS[kind]}" in text
    shown = [env.vocab.index(COLORS[color]), env.vocab.index(KINDS[kind])]
    assert env._mask_list[TAKE_] and env._tokens()[29:31] == shown


def test_one_object_in_hand_and_processing_needs_its_appliance() -> None:
    env = HouseholdEnv(difficulty=1.0)
    env.reset(seed=5)
    obj = len(env._names) - 1  # a distractor
    _hold(env, obj)
    env._room, env._at = 0, -1  # the kitchen holds fridge, microwave and sink
    env._update_mask()
    assert not any(env._mask_list[a] for a in (CLEAN_, HEAT_, COOL_, USE_, PUT_))
    for place, command, status in ((SINK, CLEAN_, 1), (MICROWAVE, HEAT_, 2), (FRIDGE, COOL_, 3)):
        env.step(GO_ + place)
        assert not any(env._mask_list[TAKE_ : TAKE_ + MAX_OBJECTS])  # one object at a time
        others = {CLEAN_, HEAT_, COOL_, USE_} - {command}
        assert env._mask_list[command] and not any(env._mask_list[a] for a in others)
        env.step(command)
        assert env._status[obj] == status  # the last process wins: hot replaces clean, cool hot
    assert not env._mask_list[PUT_]  # the fridge starts closed at d=1
    env.step(OPEN_)
    env.step(PUT_)
    assert env._held == -1 and env._where[obj] == FRIDGE and not env._mask_list[COOL_]


def test_other_rooms_need_a_go_to_room_first() -> None:
    env = HouseholdEnv(difficulty=1.0)
    _, info = env.reset(seed=2)
    here, away = env._room, (env._room + 1) % 3
    assert all(info["action_mask"][GO_ + r] for r in env._room_recs[here])
    assert not any(info["action_mask"][GO_ + r] for r in env._room_recs[away])
    assert info["action_mask"][away] and not info["action_mask"][here]
    _, _, _, _, info = env.step(away)
    assert env._at == -1 and all(info["action_mask"][GO_ + r] for r in env._room_recs[away])


def test_goal_detail_is_live_then_start_then_none() -> None:
    env = HouseholdEnv(difficulty=0.2, obs_mode="text")
    text, info = env.reset(seed=4)
    assert env._tokens()[5:9] == env._hint_tokens() != [1, 1, 1, 1]
    for _ in range(info["optimal_len"] - 1):  # the hint follows the object into the hand
        text, _, _, _, info = env.step(np.flatnonzero(info["oracle_mask"]).tolist()[0])
    assert env.vocab[env._tokens()[5]] == "holding" and "Hint: you are holding the" in text
    env = HouseholdEnv(difficulty=0.5, obs_mode="text")
    text, info = env.reset(seed=4)
    start = env._tokens()[5:9]
    for _ in range(info["optimal_len"] - 1):
        text, _, _, _, info = env.step(np.flatnonzero(info["oracle_mask"]).tolist()[0])
    assert env._tokens()[5:9] == start and "was first " in text
    env = HouseholdEnv(difficulty=0.9, obs_mode="text")
    text, _ = env.reset(seed=4)
    assert env._tokens()[5:9] == [1, 1, 1, 1] and "Hint" not in text


def test_examine_needs_the_goal_object_under_the_lamp() -> None:
    env = HouseholdEnv(difficulty=0.7)
    seed = next(s for s in range(100) if env.reset(seed=s) and env._family == "examine")
    _, info = env.reset(seed=seed)
    wrong = len(env._names) - 1  # a distractor, held at the lamp
    _hold(env, wrong)
    env._room, env._at = env._rec_room[DESK], DESK
    env._update_mask()
    env._last_distance = env._distance()
    assert env._mask_list[USE_]
    _, _, terminated, _, info = env.step(USE_)
    assert not terminated and info["progress"] == 0
    steps, done = 0, False
    while not done:
        _, reward, terminated, truncated, info = env.step(np.flatnonzero(info["oracle_mask"]).tolist()[0])
        steps, done = steps + 1, terminated or truncated
    assert terminated and reward == 1.0 and env._held == 0


def test_pick_two_needs_both_objects_in_place() -> None:
    env = HouseholdEnv(difficulty=1.0)
    seed = next(s for s in range(100) if env.reset(seed=s) and env._family == "two")
    _, info = env.reset(seed=seed)
    puts = 0
    while True:
        action = np.flatnonzero(info["oracle_mask"]).tolist()[0]
        _, _, terminated, _, info = env.step(action)
        puts += action == PUT_
        if terminated:
            break
        assert puts < 2
    assert puts == 2 and env._where[0] == env._where[1] == env._target


@pytest.mark.parametrize("place", [("countertop", 2), ("desk", 1)])
def test_longest_text_fits_text_max_length(place: tuple[str, int]) -> None:
    env = HouseholdEnv(difficulty=1.0, obs_mode="text")
    seed = next(s for s in range(200) if env.reset(seed=s) and env._family == "two")
    env.reset(seed=seed)
    # the worst case: longest names and status, two "was first" hints, everything in one place
    box = RECEPTACLES.index(place)
    env._knobs = dataclasses.replace(env._knobs, goal_detail="start")
    env._start_hint = [env.vocab.index("countertop"), env.vocab.index("2")] * 2
    env._names = [(COLORS.index("yellow"), KINDS.index("potato"))] * len(env._names)
    env._room, env._at = env._rec_room[box], box
    for obj in range(len(env._names)):
        env._contents[env._where[obj]].remove(obj)
        env._contents[box].append(obj)
        env._where[obj], env._status[obj] = box, 1
    text = env._text()
    assert len(env._names) == MAX_OBJECTS and text.count("was first on countertop 2") == 2
    assert len(text) <= env.text_max_length and set(text) <= set(env.text_charset)
    assert len(text) > 0.8 * env.text_max_length  # the bound is not wildly loose


def test_rgb_array_render_draws_the_house() -> None:
    env = gym.make("RLA-Household-v0", difficulty=1.0, render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert (frame == (60, 90, 230)).all(axis=2).any()  # the agent's room is marked
    ansi = gym.make("RLA-Household-v0", render_mode="ansi", obs_mode="text")
    text, _ = ansi.reset(seed=0)
    assert ansi.render() == text


def _expected_cells(d: float) -> dict[str, str]:
    k = household_knobs(d)
    return {
        "rooms": str(k.rooms),
        "receptacles": str(k.receptacles),
        "objects": str(k.objects),
        "objects per receptacle": str(k.max_per_receptacle),
        "closed-container probability": short(k.closed_prob),
        "task families": " ".join(k.families),
        "goal detail": k.goal_detail,
        "step budget": budget_cell(k),
    }


def test_docstring_knob_table_matches_the_knob_function() -> None:
    check_knob_table(HouseholdEnv.__doc__ or "", {d: _expected_cells(d) for d in LEVELS})


@pytest.mark.parametrize("array_state", [None, False, True])
def test_no_oracle_command_once_the_goal_is_reached(array_state: bool | None) -> None:
    """At the step that succeeds, distance 0, ``oracle_mask`` is empty (an examine task's oracle
    offered "use lamp" again: its state leaves out that the object was examined), single env
    and both vector paths alike."""
    from rla_gym.evaluation import oracle_agent

    rng = np.random.default_rng(0)
    ends = 0
    if array_state is None:
        env = gym.make("RLA-Household-v0", difficulty=0.7)
        for seed in range(60):
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(oracle_agent(obs, info, rng))
                done = terminated or truncated
            assert terminated and info["distance"] == 0 and not info["oracle_mask"].any()
            ends += 1
    else:
        envs = gym.make_vec("RLA-Household-v0", num_envs=64, difficulty=0.7, array_state=array_state,
                            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)  # fmt: skip
        _, info = envs.reset(seed=0)
        for _ in range(40):
            actions = (rng.random(info["oracle_mask"].shape) * info["oracle_mask"]).argmax(axis=1)
            _, _, terminated, _, info = envs.step(actions)
            rows = np.flatnonzero(terminated)
            if rows.size:
                final = info["final_info"]
                assert (final["distance"][rows] == 0).all() and not final["oracle_mask"][rows].any()
            ends += rows.size
    assert ends >= 60
