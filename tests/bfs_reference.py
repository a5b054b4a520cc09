"""An independent brute-force solver for TextNav, used to prove the oracle exact.

It searches the full state (room, every door, every item's place) breadth-first with
the env's own rules written out again here, sharing no code with the oracle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from rla_gym.envs.textnav import CLOSED, HELD, INVENTORY_SLOTS, LOCKED, OPEN, TextNavEnv


def _moves(env: TextNavEnv, state: tuple) -> list[tuple]:
    room, doors, places = state
    held = sum(p == HELD for p in places)
    out = []
    for other in env._neighbors[room]:
        if other < 0:
            continue
        edge = (other if env._parent[other] == room else room) - 1
        if doors[edge] == OPEN:
            out.append((other, doors, places))
        elif doors[edge] == CLOSED or (doors[edge] == LOCKED and places[env._key] == HELD):
            out.append((room, doors[:edge] + (OPEN,) + doors[edge + 1 :], places))
    for i, place in enumerate(places):
        if place == room and held < INVENTORY_SLOTS:
            out.append((room, doors, places[:i] + (HELD,) + places[i + 1 :]))
        elif place == HELD:
            out.append((room, doors, places[:i] + (room,) + places[i + 1 :]))
    return out


def _solved(env: TextNavEnv, state: tuple) -> bool:
    room, _, places = state
    if env._goal_item >= 0:
        return places[env._goal_item] == env._goal_room
    return room == env._goal_room


def current_state(env: TextNavEnv) -> tuple:
    places = [HELD] * len(env._items)
    for room, items in enumerate(env._room_items):
        for i in items:
            places[i] = room
    return env._room, tuple(env._door), tuple(places)


def shortest_distance(
    start: Any, moves: Callable[[Any], Iterable[Any]], solved: Callable[[Any], bool], limit: int
) -> int | None:
    """Breadth-first search: fewest moves from ``start`` to a solved state, or None beyond ``limit``."""
    if solved(start):
        return 0
    seen = {start}
    frontier = deque([(start, 0)])
    while frontier:
        state, depth = frontier.popleft()
        if depth >= limit:
            continue
        for nxt in moves(state):
            if nxt in seen:
                continue
            if solved(nxt):
                return depth + 1
            seen.add(nxt)
            frontier.append((nxt, depth + 1))
    return None


def bfs_distance(env: TextNavEnv, limit: int) -> int | None:
    """Shortest number of commands to success from the env's current state, or None beyond limit."""
    return shortest_distance(current_state(env), lambda s: _moves(env, s), lambda s: _solved(env, s), limit)
