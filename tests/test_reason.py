"""RLA-Reason specifics: the oracle is exact, tasks follow the knobs, wrong steps are recoverable."""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest
from env_checks import budget_cell, check_knob_table, check_oracle_by_search
from reason_reference import bfs_distance, row_values

from rla_gym.envs.reason import (
    ERASE,
    FAMILIES,
    MEMORY,
    ROWS,
    VARS,
    WRITE_,
    ReasonEnv,
    reason_knobs,
)
from rla_gym.evaluation import oracle_agent, random_agent

LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _tasks(difficulty: float, seeds: range, **kwargs) -> list[ReasonEnv]:
    """Fresh envs reset on the given task seeds."""
    envs = []
    for seed in seeds:
        env = ReasonEnv(difficulty=difficulty, **kwargs)
        env.reset(options={"task": env.make_task(difficulty, seed)})
        envs.append(env)
    return envs


@pytest.mark.parametrize("difficulty", LEVELS)
def test_oracle_distance_and_actions_match_brute_force_search(difficulty: float) -> None:
    rng = np.random.default_rng(int(difficulty * 100))
    near = 8 if difficulty <= 0.25 else 6  # brute force is exponential in the buffer
    checked = check_oracle_by_search(
        lambda: ReasonEnv(difficulty=difficulty), bfs_distance, seeds=8, steps=30, near=near, rng=rng
    )
    assert checked >= 30


def _python_value(expression: str) -> int:
    """Evaluate the task's own text with Python: a check independent of the row values."""
    return int(eval(expression.replace(" = ", " == ")))


def _run_program(start: dict[str, int], program: list) -> list[tuple[str, int]]:
    """An independent interpreter: (label, value) of every executed statement."""
    values, trace = dict(start), []

    def get(operand) -> int:
        return values[operand[1]] if operand[0] == "v" else operand[1]

    def assign(statement) -> None:
        _, target, a, op, b = statement
        values[target] = eval(f"{get(a)} {op} {get(b)}")
        trace.append((target, values[target]))

    for statement in program:
        if statement[0] == "set":
            assign(statement)
        elif statement[0] == "if":
            truth = int(eval(f"{get(statement[1])} {statement[2]} {get(statement[3])}"))
            trace.append(("if", truth))
            assign(statement[4] if truth else statement[5])
        else:
            for _ in range(statement[1]):
                assign(statement[2])
    return trace


@pytest.mark.parametrize("difficulty", LEVELS)
def test_row_values_match_independent_evaluations(difficulty: float) -> None:
    for env in _tasks(difficulty, range(60)):
        values = [row.value for row in env._rows]
        assert row_values(env) == values
        if env._family in ("arithmetic", "logic"):
            assert _python_value(env._expression(len(env._rows) - 1, original=True)) == values[-1]
        elif env._family == "trace":
            trace = _run_program(env._start, env._program)
            assert trace == [(row.label, row.value) for row in env._rows[:-1]]
            final = dict(env._start) | {label: v for label, v in trace if label != "if"}
            assert values[-1] == final[env._header[2]]
        elif env._header[1] == "kth":
            assert values == sorted(env._items)[: len(values)]


def test_knobs_are_monotone_in_difficulty() -> None:
    grid = [reason_knobs(d) for d in np.linspace(0, 1, 101)]
    for a, b in itertools.pairwise(grid):
        assert set(a.families) <= set(b.families) and a.operations <= b.operations
        assert a.operand_digits <= b.operand_digits and a.depth <= b.depth
        assert a.distractors <= b.distractors and set(a.operators) <= set(b.operators)
        assert a.max_value <= b.max_value and a.digit_choices <= b.digit_choices
        assert a.budget_factor >= b.budget_factor and a.budget_slack >= b.budget_slack
        assert b.operations <= 2**b.depth - 1  # a tree of that many operators fits the depth
    assert grid[0].families == ("arithmetic",) and grid[-1].families == FAMILIES


def _depth(env: ReasonEnv, row: int) -> int:
    below = [_depth(env, o[1]) for o in (env._rows[row].a, env._rows[row].b) if o and o[0] == "r"]
    return 1 + max(below, default=0)


@pytest.mark.parametrize("difficulty", [0.0, 0.3, 0.5, 0.8, 1.0])
def test_generated_tasks_follow_the_knobs(difficulty: float) -> None:
    k = reason_knobs(difficulty)
    families = set()
    for env in _tasks(difficulty, range(80)):
        family, rows = env._family, env._rows
        families.add(family)
        values = [row.value for row in rows]
        assert all(abs(v) <= k.max_value for v in values) and len(rows) <= ROWS
        digits = set(env._allowed) - {"-"}
        assert len(digits) >= k.digit_choices and {c for v in values for c in str(abs(v))} <= digits
        numbers = [o[1] for r in rows for o in (r.a, r.b) if o and o[0] == "n" and r.op != "kth"]
        assert all(0 <= n < 10**k.operand_digits for n in numbers + env._items)
        if family == "arithmetic":
            assert len(rows) == k.operations and _depth(env, len(rows) - 1) <= k.depth
            assert {r.op for r in rows} <= set(k.operators)
        elif family == "logic":
            assert len(rows) == k.operations and sum(r.op == "not" for r in rows) == 1 - k.operations % 2
        elif env._header[1] == "kth":
            assert len(rows) == k.operations and len(env._items) == min(MEMORY, k.operations + k.distractors)
        elif family == "list":
            assert len(rows) == len(env._items) == min(ROWS, k.operations + k.distractors)
            skipped = sum(a.value == b.value for a, b in itertools.pairwise(rows)) + (rows[0].value == 0)
            assert skipped >= min(k.distractors, len(rows) - 1)  # distractors fail the filter
        else:
            assert len(rows) == k.operations + 1 and len(env._start) == 2 + k.distractors
            mentioned = {o[1] for r in rows for o in (r.a, r.b) if o and o[0] == "v"} | {
                r.label for r in rows
            }
            assert not mentioned & set(VARS[2 : 2 + k.distractors])  # unused variables stay unused
    assert families == set(k.families)


def test_wrong_writes_are_rejected_and_recoverable() -> None:
    env = gym.make("RLA-Reason-v0", difficulty=0.0, obs_mode="text")
    text, info = env.reset(seed=0)
    base = env.unwrapped
    right, optimal = base._strings[0], info["optimal_len"]
    wrong = next(c for c in base._allowed if c != right)
    text, _, _, _, info = env.step("0123456789".index(wrong))
    assert (
        f"Writing: {wrong}_" in text
        and info["progress"] == -1
        and np.flatnonzero(info["oracle_mask"]).tolist() == [ERASE]
    )
    text, reward, terminated, _, info = env.step(WRITE_)
    assert "(rejected)" in text and info["progress"] == 0 and not terminated and reward == 0.0
    assert not info["action_mask"][:10].any()  # the buffer is full: erase it first
    text, _, _, _, info = env.step(ERASE)
    assert text.endswith("Writing: _") and info["progress"] == 1
    assert base._distance() == optimal
    for _ in range(optimal):
        text, reward, terminated, _, info = env.step(np.flatnonzero(info["oracle_mask"]).tolist()[0])
    assert terminated and reward == 1.0 and f"=> {right}" in text


def test_transcript_example_at_low_difficulty() -> None:
    env = gym.make("RLA-Reason-v0", difficulty=0.0, obs_mode="text")
    text, info = env.reset(seed=3)
    a, b = (env.unwrapped._rows[0].a[1], env.unwrapped._rows[0].b[1])
    assert text.startswith(f"Task: evaluate {a} + {b} step by step.") and "s1: " in text
    assert info["optimal_len"] == 2 and info["step_budget"] == 16
    assert sum(info["action_mask"][:10]) == 3  # three admissible digits at d=0
    text, *_, info = env.step(np.flatnonzero(info["oracle_mask"]).tolist()[0])
    assert f"Writing: {a + b}_" in text
    text, reward, terminated, _, info = env.step(WRITE_)
    assert terminated and reward > 0 and info["is_success"] and f"s1: {a} + {b}  => {a + b}" in text


def test_worksheet_shows_the_work_so_far() -> None:
    """Arithmetic reduces the expression, lists tick items off, traces update variables."""
    seen = set()
    for env in _tasks(0.75, range(40), obs_mode="text"):
        rng = np.random.default_rng(0)
        before = env._text()
        info = {"oracle_mask": env.oracle_mask()}
        while not env._written[0] or env._buffer:
            _, _, _, _, info = env.step(oracle_agent(None, info, rng))
        after, value = env._text(), env._rows[0].value
        if env._family == "arithmetic":
            assert after.splitlines()[1] != before.splitlines()[1] and f"{value}" in after.splitlines()[1]
        elif env._family == "list":
            assert "[" + str(env._items[0] if env._header[1] == "sum" else value) + "]" in after
        elif env._family == "trace":
            assert "s2: " in after and "s2: " not in before  # the next statement is revealed
            if env._rows[0].label in VARS:
                assert f"{env._rows[0].label} = {value}" in after.split("Variables: ")[1]
        seen.add(env._family)
    assert seen == set(FAMILIES)


def test_text_and_tokens_describe_the_same_state() -> None:
    rng = np.random.default_rng(1)
    for env in _tasks(1.0, range(30), obs_mode="text"):
        obs = {"action_mask": env._mask}
        info = {"action_mask": env._mask, "oracle_mask": env.oracle_mask()}
        for _ in range(rng.integers(0, 25)):
            action = oracle_agent(obs, info, rng) if rng.random() < 0.7 else random_agent(obs, info, rng)
            _, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        text, words = env._text(), env.decode_tokens(env._tokens())
        numbers = {w for w in words if w.lstrip("-").isdigit()}
        assert all(n in text for n in numbers)
        buffer = "".join(w[1] for w in words if w.startswith("#"))
        assert f"Writing: {buffer}_" in text and ("rejected" in words) == ("(rejected)" in text)
        assert text.count("=> ?") == words.count("ready") and text.count("(waiting)") == words.count(
            "waiting"
        )


def test_text_never_exceeds_its_bound() -> None:
    longest = 0
    for difficulty in (0.75, 1.0):
        for env in _tasks(difficulty, range(300), obs_mode="text"):
            for row in range(len(env._rows) - 1):  # every row but the last written: all shown
                env._written[row] = True
            env._buffer, env._rejected = "-999", True
            longest = max(longest, len(env._text()))
    assert longest <= ReasonEnv.text_max_length / 1.5


def test_rgb_array_render_shows_the_rows() -> None:
    env = gym.make("RLA-Reason-v0", difficulty=0.5, render_mode="rgb_array")
    _, info = env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert (frame == (230, 200, 40)).all(axis=2).any()  # a ready row
    for _ in range(info["optimal_len"] // 2):
        _, _, _, _, info = env.step(np.flatnonzero(info["oracle_mask"]).tolist()[0])
    assert (env.render() == (60, 180, 80)).all(axis=2).any()  # a done row
    ansi = gym.make("RLA-Reason-v0", render_mode="ansi", obs_mode="text")
    text, _ = ansi.reset(seed=0)
    assert ansi.render() == text


def _expected_cells(d: float) -> dict[str, str]:
    k = reason_knobs(d)
    families = {1: "arithmetic", 2: "+logic", 3: "+list", 4: "+trace"}[len(k.families)]
    return {
        "families": families,
        "operations": str(k.operations),
        "operand digits": str(k.operand_digits),
        "nesting depth": str(k.depth),
        "distractors": str(k.distractors),
        "operators": k.operators,
        "largest value": str(k.max_value),
        "admissible digits": str(k.digit_choices),
        "step budget": budget_cell(k),
    }


def test_docstring_knob_table_matches_the_knob_function() -> None:
    check_knob_table(ReasonEnv.__doc__ or "", {d: _expected_cells(d) for d in LEVELS})
