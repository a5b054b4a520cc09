"""Checks every suite env's tests share: the oracle against brute-force search, the knob table.

Each env's test module supplies what is specific to it (its brute-force solver, its expected
table cells); the procedure lives here once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from rla_gym.core import RLAEnv
from rla_gym.evaluation import random_agent


def check_oracle_by_search(
    make_env: Callable[[], RLAEnv],
    bfs_distance: Callable[[Any, int], int | None],
    *,
    seeds: int,
    steps: int,
    near: int,
    rng: np.random.Generator,
    wander: float = 0.0,
) -> int:
    """Compare the oracle with breadth-first search along mixed oracle/random walks.

    At every visited state within ``near`` optimal moves of the goal, the oracle's distance
    must equal the searched one, and ``np.flatnonzero(info["oracle_mask"]).tolist()`` must hold exactly the
    admissible actions after which search finds one move less. Farther states are walked
    through (by the oracle, or at random with probability ``wander``), since search is
    exponential in the distance. Returns the number of states checked.
    """
    checked = 0
    for seed in range(seeds):
        env = make_env()
        obs, info = env.reset(seed=seed)
        for _ in range(steps):
            distance = env._distance()
            if distance > near:
                off = wander > 0 and rng.random() < wander
                action = (
                    random_agent(obs, info, rng) if off else np.flatnonzero(info["oracle_mask"]).tolist()[0]
                )
            else:
                assert bfs_distance(env, distance + 1) == distance, seed
                for candidate in np.flatnonzero(info["action_mask"]):
                    child = copy.deepcopy(env)
                    child.step(int(candidate))
                    after = 0 if child._success() else bfs_distance(child, distance)
                    assert (after == distance - 1) == (
                        candidate in np.flatnonzero(info["oracle_mask"]).tolist()
                    ), (seed, candidate)
                checked += 1
                pick_oracle = np.flatnonzero(info["oracle_mask"]).tolist() and rng.random() < 0.4
                action = (
                    np.flatnonzero(info["oracle_mask"]).tolist()[0]
                    if pick_oracle
                    else random_agent(obs, info, rng)
                )
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
    return checked


def short(x: float) -> str:
    """A probability as the knob tables print it: ``.35``, ``0``, ``1``."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return text[1:] if text.startswith("0.") else text


def budget_cell(knobs: Any) -> str:
    """The step-budget cell of a knob table, from ``budget_factor`` and ``budget_slack``."""
    factor = f"{knobs.budget_factor:.1f}".removesuffix(".0")
    return f"{factor}x" + (f"+{knobs.budget_slack}" if knobs.budget_slack else "")


def check_knob_table(doc: str, columns: Mapping[float, Mapping[str, str]]) -> None:
    """Every labelled row of the docstring's knob table shows the expected cell per level.

    A row belongs to the longest label its first cell equals or starts with (then a space),
    so "objects" and "objects per receptacle" stay apart. Every label must be found.
    """
    labels: Iterable[str] = next(iter(columns.values())).keys()
    found = set()
    for line in doc.splitlines():
        if not line.strip().startswith("| "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        matching = [label for label in labels if cells[0] == label or cells[0].startswith(label + " ")]
        if not matching:
            continue
        label = max(matching, key=len)
        assert cells[2:] == [column[label] for column in columns.values()], (label, cells[2:])
        found.add(label)
    assert found == set(labels), sorted(set(labels) - found)
