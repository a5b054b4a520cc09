"""GUI specifics: the oracle is exact, knobs are monotone and bite, the widgets behave."""

from __future__ import annotations

import copy
import itertools

import gymnasium as gym
import numpy as np
import pytest
from env_checks import budget_cell, check_knob_table, check_oracle_by_search, short
from gui_reference import bfs_distance, current_state
from hypothesis import given, settings
from hypothesis import strategies as st

from rla_gym.envs.gui import GUI_VERSIONS, GUIEnv, GUIEnvV1, gui_knobs, scroll_cost
from rla_gym.envs.gui.layout import (
    ACTION_NAMES,
    CANCEL_,
    ENTER_,
    ESCAPE_,
    KIND_CHECK,
    NEXT_TAB_,
    OK_,
    ROW_,
    ROWS,
    SCROLL_DOWN_,
    SCROLL_UP_,
    TAB_,
    TOKEN_ID,
    TYPE_,
    VALUE_TOKENS,
    VOCAB,
    WAIT_,
)
from rla_gym.evaluation import random_agent


@pytest.mark.parametrize(
    ("cls", "difficulty"), [*((GUIEnv, d) for d in (0.0, 0.15, 0.3, 0.5, 0.75, 1.0)), (GUIEnvV1, 0.15)]
)
def test_oracle_distance_and_actions_match_brute_force_search(cls: type[GUIEnv], difficulty: float) -> None:
    """(v1 differs only below 0.2: at 0.15 its open dialog needs OK.)"""
    rng = np.random.default_rng(int(difficulty * 100))
    checked = check_oracle_by_search(
        lambda: cls(difficulty=difficulty), bfs_distance, seeds=8, steps=30, near=6, rng=rng
    )
    assert checked >= 15


def test_scroll_cost_matches_a_walk_over_offsets() -> None:
    for offset, lo, hi in itertools.product(range(6), range(10), range(10)):
        if lo > hi:
            continue
        best = min(  # go to one end first, then the other
            abs(offset - a) + abs(a - b)
            for a, b in itertools.permutations([min(offset, lo), max(offset, hi - ROWS + 1)])
        )
        assert scroll_cost(offset, lo, hi) == best


@pytest.mark.parametrize("version", GUI_VERSIONS)
def test_knobs_are_monotone_in_difficulty(version: int) -> None:
    grid = [gui_knobs(d, version) for d in np.linspace(0, 1, 101)]
    for a, b in itertools.pairwise(grid):
        for name in ("top_menus", "items_per_menu", "menu_depth", "dialogs", "tabs", "controls", "goals"):
            assert getattr(a, name) <= getattr(b, name), name
        assert a.goal_dialogs <= b.goal_dialogs and a.field_share <= b.field_share
        opened = ("nothing", "menus", "dialog")
        assert a.ambiguity <= b.ambiguity and opened.index(a.start_open) >= opened.index(b.start_open)
        assert a.instant_apply >= b.instant_apply
        assert a.budget_factor >= b.budget_factor and a.budget_slack >= b.budget_slack
    assert (grid[0].controls, grid[-1].controls, grid[-1].menu_depth) == (2, 10, 3)


@pytest.mark.parametrize("difficulty", [0.0, 0.3, 0.5, 0.75, 1.0])
def test_generated_worlds_follow_the_knobs(difficulty: float) -> None:
    k = gui_knobs(difficulty)
    env = GUIEnv(difficulty=difficulty)
    for seed in range(20):
        env.reset(seed=seed)
        assert len(env._top) == k.top_menus
        menus = [n for n, kind in enumerate(env._n_kind) if kind <= 1]
        assert all(len(env._n_children[n]) == k.items_per_menu for n in menus)
        assert len(env._d_pages) == k.dialogs and len(set(env._d_label)) == k.dialogs
        assert all(
            len(pages) == k.tabs and all(len(p) == k.controls for p in pages) for pages in env._d_pages
        )
        assert len(set(env._c_label)) == len(env._c_label)  # every setting has its own name
        assert len(env._g_control) == k.goals and set(env._g_dialog) == set(range(k.goal_dialogs))
        assert all(len(env._d_path[d]) == k.menu_depth for d in range(k.goal_dialogs))
        assert all(1 <= len(path) <= k.menu_depth for path in env._d_path)
        assert all(env._initial[c] != t for c, t in zip(env._g_control, env._g_target, strict=True))
        assert (env._core[0] == 0) == (k.start_open == "dialog")
        assert env._core[1] == (env._d_path[0] if k.start_open == "menus" else ())
        unknown = env._instruction.count(2)  # <unknown> words: the path left unsaid
        assert unknown == k.goals * (0, 1, 4, 5)[k.ambiguity]
        if k.field_share == 0:
            assert all(env._c_kind[c] == KIND_CHECK for c in env._g_control)


def test_text_and_tokens_describe_the_same_state() -> None:
    env = GUIEnv(difficulty=0.5, obs_mode="text")
    rng = np.random.default_rng(1)
    text, info = env.reset(seed=4)
    skip = {"<none>", "<unknown>", "opener"}
    for _ in range(60):
        for word in set(env.decode_tokens(env._tokens())) - skip:
            assert word in text, (word, text)
        text, _, terminated, truncated, info = env.step(random_agent(text, info, rng))
        if terminated or truncated:
            text, info = env.reset()


def test_transcript_example_at_low_difficulty() -> None:
    env = gym.make("RLA-GUI-v0", difficulty=0.0, obs_mode="text")
    text, info = env.reset(seed=0)
    assert text.startswith("Task: ") and "(changes apply at once)" in text and info["optimal_len"] == 1
    assert "Screen: dialog " in text and "Buttons: [33] close." in text
    _, _, terminated, _, info = env.step(np.flatnonzero(info["oracle_mask"]).tolist()[0])
    assert terminated and info["is_success"]
    env = gym.make("RLA-GUI-v0", difficulty=0.3, obs_mode="text")
    text, info = env.reset(seed=0)
    assert "Screen: main window." in text and text.split("\n")[0].endswith("then press ok.")
    for _ in range(info["optimal_len"]):
        text, reward, terminated, _, info = env.step(np.flatnonzero(info["oracle_mask"]).tolist()[0])
    assert terminated and reward == 1.0 and info["is_success"]


def _open_goal_dialog(env: GUIEnv) -> None:
    """Follow the oracle until the goal dialog is open."""
    while env._core[0] < 0:
        env.step(env._oracle_actions()[0])


def test_ok_saves_pending_edits_and_cancel_drops_them() -> None:
    for seed in range(6):
        env = GUIEnv(difficulty=0.25)  # one setting, saved by OK
        env.reset(seed=seed)
        _open_goal_dialog(env)
        while env._core[5] == env._core[6]:  # follow the oracle until the goal is right, unsaved
            env.step(env._oracle_actions()[0])
        saved_before, pending = env._committed[:], env._pending[:]
        assert pending != saved_before
        clone = copy.deepcopy(env)
        env.step(CANCEL_)
        assert env._committed == saved_before and env._core[0] == -1 and not env._success()
        _, reward, terminated, _, _ = clone.step(ENTER_)
        assert clone._committed == pending and clone._core[0] == -1 and terminated and reward == 1.0


def test_instant_dialog_applies_at_once_and_has_only_close() -> None:
    env = GUIEnv(difficulty=0.0)
    _, info = env.reset(seed=2)
    mask = info["action_mask"]
    assert mask[OK_] and not mask[CANCEL_] and not mask[ENTER_] and not mask[ESCAPE_]
    row = next(
        a for a in range(ROW_, OK_) if mask[a] and a not in np.flatnonzero(info["oracle_mask"]).tolist()
    )
    before = env._committed[:]
    env.step(row)  # a distractor checkbox or field: clicking a checkbox saves it at once
    c = env._d_pages[0][0][row - ROW_]
    assert (env._committed[c] != before[c]) == (env._c_kind[c] == KIND_CHECK)


def test_scrolling_tabs_and_typing() -> None:
    env = GUIEnv(difficulty=1.0)
    _, info = env.reset(seed=0)
    _open_goal_dialog(env)
    info = {"action_mask": np.array(env._action_mask())}
    assert info["action_mask"][SCROLL_DOWN_] and not info["action_mask"][SCROLL_UP_]
    first = env._tokens()
    env.step(SCROLL_DOWN_)
    assert env._core[3][0] == 1 and env._tokens() != first
    env.step(TAB_ + 1)
    env.step(NEXT_TAB_)  # the tab key goes on to the next page
    assert env._core[2] == 2 and env._core[3][0] == 1  # each page keeps its scroll offset
    field = next(
        r for r, c in enumerate(env._d_pages[env._core[0]][2][:ROWS]) if env._c_kind[c] != KIND_CHECK
    )
    env.step(ROW_ + field)
    c = env._core[4]
    mask = env._action_mask()
    typable = [v for v in range(len(VALUE_TOKENS)) if mask[TYPE_ + v]]
    numbers = env._c_kind[c] == 1
    assert typable and all((v < 8) == numbers for v in typable)
    assert env._pending[c] not in [VALUE_TOKENS[v] for v in typable]  # typing the same value is masked
    env.step(TYPE_ + typable[0])
    assert env._pending[c] == VALUE_TOKENS[typable[0]] and env._committed[c] != env._pending[c]


def test_menus_open_switch_and_close() -> None:
    env = GUIEnv(difficulty=0.8)
    env.reset(seed=1)
    env.step(0)
    assert env._core[1] == (env._top[0],)
    env.step(1)  # another top menu replaces it
    assert env._core[1] == (env._top[1],)
    env.step(1)  # clicking the open one closes it
    assert env._core[1] == ()
    assert not env._action_mask()[ESCAPE_]


def test_every_admissible_command_but_wait_changes_the_observation() -> None:
    rng = np.random.default_rng(3)
    for difficulty in (0.0, 0.4, 0.8):
        env = GUIEnv(difficulty=difficulty)
        obs, info = env.reset(seed=7)
        for _ in range(150):
            for action in np.flatnonzero(info["action_mask"]):
                if action != WAIT_:
                    child = copy.deepcopy(env)
                    after = child.step(int(action))[0]
                    assert not np.array_equal(after["tokens"], obs["tokens"]), ACTION_NAMES[action]
            obs, _, terminated, truncated, info = env.step(random_agent(obs, info, rng))
            if terminated or truncated:
                obs, info = env.reset()


def test_text_bound_holds_for_the_longest_screens() -> None:
    longest = max(len(w) for w in VOCAB)
    task = len("Task: ") + 3 * (len("uncheck '' to  in  >  >  > , tab ; ") + 9 * longest) + 20
    menus = 4 * (len("Menu : .") + longest + 6 * (len("[23] submenu  (open), ") + longest))
    dialog = 400 + 9 * (len("[28] checkbox '' = ; (focused)") + 3 * longest)
    assert task + max(menus, dialog) + 40 <= GUIEnv.text_max_length
    env = GUIEnv(difficulty=0.8, obs_mode="text")
    text, _ = env.reset(seed=0)
    deepest = max(range(len(env._d_path)), key=lambda d: len(env._d_path[d]))
    for level, node in enumerate(env._d_path[deepest]):  # open the deepest menus
        slot = (
            env._top.index(node)
            if level == 0
            else 6 + 6 * (level - 1) + env._n_children[env._core[1][-1]].index(node)
        )
        text, *_ = env.step(slot)
    assert text.count("\nMenu ") == 1 + len(env._d_path[deepest]) and len(text) <= GUIEnv.text_max_length


def test_rgb_array_render_is_a_screenshot() -> None:
    env = gym.make("RLA-GUI-v0", difficulty=0.5, render_mode="rgb_array")
    _, info = env.reset(seed=0)
    frames = [env.render()]
    for _ in range(info["optimal_len"] - 1):
        _, _, _, _, info = env.step(np.flatnonzero(info["oracle_mask"]).tolist()[0])
        frames.append(env.render())
    assert all(f.shape == (160, 240, 3) and f.dtype == np.uint8 for f in frames)
    assert all(not np.array_equal(a, b) for a, b in itertools.pairwise(frames))
    assert any((f == (250, 210, 40)).all(axis=2).any() for f in frames)  # a focus ring was drawn
    ansi = gym.make("RLA-GUI-v0", render_mode="ansi", obs_mode="text")
    text, _ = ansi.reset(seed=0)
    assert ansi.render() == text


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    difficulty=st.floats(0.0, 1.0),
    obs_mode=st.sampled_from(["dict", "flat", "text"]),
    actions=st.lists(st.integers(-2, len(ACTION_NAMES) + 1), min_size=1, max_size=100),
)
def test_saved_settings_state_follows_the_widgets(seed, difficulty, obs_mode, actions) -> None:
    """The oracle's compact state bit for "setting g saved wrong" matches the widget values."""
    env = GUIEnv(difficulty=difficulty, obs_mode=obs_mode)
    env.reset(seed=seed)
    for action in actions:
        if not 0 <= action < len(ACTION_NAMES):
            continue
        _, _, terminated, truncated, _ = env.step(action)
        saved_right = current_state(env)[6]  # read from the widget values
        assert env._core[6] == sum(1 << g for g, right in enumerate(saved_right) if not right)
        if terminated or truncated:
            env.reset()


def _expected_cells(d: float, version: int = 0) -> dict[str, str]:
    k = gui_knobs(d, version)
    names = ("full path", "no tab", "dialog only", "setting only")
    return {
        "top menus": str(k.top_menus),
        "items per menu": str(k.items_per_menu),
        "menu depth (menus to open before the goal dialog's item)": str(k.menu_depth),
        "open at the start": k.start_open,
        "dialogs apply changes at once (no OK)": "yes" if k.instant_apply else "no",
        "dialogs": str(k.dialogs),
        "tab pages per dialog": str(k.tabs),
        "controls per page (5 visible, more scroll)": str(k.controls),
        "settings to change": str(k.goals),
        "dialogs holding them": str(k.goal_dialogs),
        "share of text-field settings (others checkboxes)": short(k.field_share),
        "instruction names": names[k.ambiguity],
        "step budget": budget_cell(k),
    }


@pytest.mark.parametrize(("cls", "version"), [(GUIEnv, 0), (GUIEnvV1, 1)])
def test_docstring_knob_table_matches_the_knob_function(cls: type[GUIEnv], version: int) -> None:
    levels = (0.0, 0.25, 0.5, 0.75, 1.0)
    check_knob_table(cls.__doc__ or "", {d: _expected_cells(d, version) for d in levels})
    row = next(line for line in (cls.__doc__ or "").splitlines() if "apply changes at once" in line)
    assert f"| d < {(0.2, 0.1)[version]} |" in row  # the threshold the columns above cannot show


def test_gui_knobs_refuses_an_unknown_version() -> None:
    with pytest.raises(ValueError, match="version must be one of"):
        gui_knobs(0.5, 2)
    with pytest.raises(TypeError, match="version must be an int, got '1'"):
        gui_knobs(0.5, "1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got True"):
        gui_knobs(0.5, True)
    assert gui_knobs(0.15, np.int64(1)) == gui_knobs(0.15, 1) != gui_knobs(0.15)  # numpy ints too


def test_v1_is_v0_but_for_ok_from_difficulty_0_1() -> None:
    """The same seeds give v0's worlds; only between 0.1 and 0.2 do v1's dialogs need OK, one
    command more on the optimal path (and the buttons row shows OK and Cancel)."""
    for d in (0.0, 0.05, 0.1, 0.15, 0.19, 0.2, 0.5, 1.0):
        assert (gui_knobs(d, 0) == gui_knobs(d, 1)) == (not 0.1 <= d < 0.2)
        v0, v1 = GUIEnv(difficulty=d), GUIEnvV1(difficulty=d)
        for seed in range(10):
            _, info0 = v0.reset(seed=seed)
            _, info1 = v1.reset(seed=seed)
            assert v1._instruction == v0._instruction and v1._c_label == v0._c_label
            if 0.1 <= d < 0.2:
                assert info1["optimal_len"] == info0["optimal_len"] + 1
                assert v0._buttons[1] == TOKEN_ID["close"] and v1._buttons[1] == TOKEN_ID["ok"]
            else:
                assert info1["optimal_len"] == info0["optimal_len"]
                assert np.array_equal(v0._tokens(), v1._tokens())
    assert (
        GUIEnvV1(difficulty=0.15).reset(seed=0)[1]["task_key"]
        != GUIEnv(difficulty=0.15).reset(seed=0)[1]["task_key"]
    )
