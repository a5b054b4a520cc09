"""An independent brute-force solver for Household, used to prove the oracle exact.

It searches the full state (room, receptacle, held object, every object's place and
status, every container's open state, the lamp flag) breadth-first with the env's
rules written out again here, sharing no code with the oracle.
"""

from __future__ import annotations

from bfs_reference import shortest_distance

from rla_gym.envs.household import HouseholdEnv
from rla_gym.envs.household.catalog import RECEPTACLES

_PROCESS = {"sink": 1, "microwave": 2, "fridge": 3}  # status an appliance gives the held object
_OPENABLE = ("fridge", "microwave", "cabinet", "drawer")


def current_state(env: HouseholdEnv) -> tuple:
    places = tuple(env._where)
    opened = frozenset(r for r in env._present if env._open >> r & 1)
    return env._room, env._at, env._held, places, tuple(env._status), opened, env._examined


def _moves(env: HouseholdEnv, state: tuple) -> list[tuple]:
    room, at, held, places, status, opened, done = state
    out = []
    for other in range(env._knobs.rooms):
        if other != room:
            out.append((other, -1, held, places, status, opened, done))
    for r in env._present:
        if env._rec_room[r] == room and r != at:
            out.append((room, r, held, places, status, opened, done))
    if at < 0:
        return out
    kind = RECEPTACLES[at][0]
    is_open = kind not in _OPENABLE or at in opened
    if not is_open:
        out.append((room, at, held, places, status, opened | {at}, done))
    elif kind in _OPENABLE:
        out.append((room, at, held, places, status, opened - {at}, done))
    if is_open and held < 0:
        for obj, place in enumerate(places):
            if place == at:
                moved = places[:obj] + (-1,) + places[obj + 1 :]
                out.append((room, at, obj, moved, status, opened, done))
    elif is_open:
        moved = places[:held] + (at,) + places[held + 1 :]
        out.append((room, at, -1, moved, status, opened, done))
    if held >= 0 and kind in _PROCESS:
        changed = status[:held] + (_PROCESS[kind],) + status[held + 1 :]
        out.append((room, at, held, places, changed, opened, done))
    if held >= 0 and kind == "desk":
        out.append((room, at, held, places, status, opened, env._family == "examine" and held == 0))
    return out


def _solved(env: HouseholdEnv, state: tuple) -> bool:
    _, _, _, places, status, _, done = state
    family = env._family
    if family == "examine":
        return done
    if family == "two":
        return places[0] == places[1] == env._target
    wanted = {"put": status[0], "clean": 1, "heat": 2, "cool": 3}[family]
    return places[0] == env._target and status[0] == wanted


def bfs_distance(env: HouseholdEnv, limit: int) -> int | None:
    """Shortest number of commands to success from the env's current state, or None beyond limit."""
    return shortest_distance(current_state(env), lambda s: _moves(env, s), lambda s: _solved(env, s), limit)
