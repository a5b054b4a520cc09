"""An independent brute-force solver for RLA-GUI-v0, used to prove the oracle exact.

It searches the UI state breadth-first with the rules written out again here, sharing
no code with the env's transition or oracle. Values are tracked as right / wrong for
the goal settings only, and focus only when it sits on a goal text field: nothing else
can change what success needs.
"""

from __future__ import annotations

from typing import Any

from bfs_reference import shortest_distance

from rla_gym.envs.gui import GUIEnv
from rla_gym.envs.gui.layout import KIND_CHECK, NODE_COMMAND, NODE_OPENER, NODE_SUB, ROWS

State = tuple[Any, ...]  # (dialog, path, page, offsets, focus, pending_right, saved_right)


def current_state(env: GUIEnv) -> State:
    """The env's UI state in the reference's terms, read from its widgets and values."""
    dialog, path, page, offsets, focus = env._core[:5]
    saved = tuple(env._committed[c] == t for c, t in zip(env._g_control, env._g_target, strict=True))
    if dialog < 0:
        return (-1, path, 0, (), -1, saved, saved)
    pending = tuple(env._pending[c] == t for c, t in zip(env._g_control, env._g_target, strict=True))
    return (dialog, (), page, offsets, _useful_focus(env, focus), pending, saved)


def _useful_focus(env: GUIEnv, control: int) -> int:
    return control if control in env._g_control and env._c_kind[control] != KIND_CHECK else -1


def _moves(env: GUIEnv, state: State) -> list[State]:
    dialog, path, page, offsets, focus, pending, saved = state
    instant = env._knobs.instant_apply
    out: list[State] = []
    if dialog < 0:
        for top in env._top:
            out.append((-1, () if path and path[0] == top else (top,), 0, (), -1, saved, saved))
        for level, menu in enumerate(path):
            for child in env._n_children[menu]:
                kind = env._n_kind[child]
                if kind == NODE_SUB:
                    out.append((-1, (*path[: level + 1], child), 0, (), -1, saved, saved))
                elif kind == NODE_COMMAND:
                    out.append((-1, (), 0, (), -1, saved, saved))
                elif kind == NODE_OPENER:
                    d = env._n_dialog[child]
                    out.append((d, (), 0, (0,) * len(env._d_pages[d]), -1, saved, saved))
        if path:
            out.append((-1, path[:-1], 0, (), -1, saved, saved))
        return out
    goals = [g for g, c in enumerate(env._g_control) if env._g_dialog[g] == dialog]
    committed = tuple(pending[g] if g in goals else saved[g] for g in range(len(saved)))
    out.append((-1, (), 0, (), -1, committed, committed))  # OK, or close
    if not instant:
        out.append((-1, (), 0, (), -1, saved, saved))  # cancel
    pages = env._d_pages[dialog]
    for p in range(len(pages)):
        out.append((dialog, (), p, offsets, -1, pending, saved))
    here = pages[page]
    for delta in (-1, 1):
        if 0 <= offsets[page] + delta <= len(here) - ROWS:
            moved = list(offsets)
            moved[page] += delta
            out.append((dialog, (), page, tuple(moved), focus, pending, saved))

    def edit(g: int, right: bool, new_focus: int) -> State:
        new_pending = pending[:g] + (right,) + pending[g + 1 :]
        new_saved = saved[:g] + (right,) + saved[g + 1 :] if instant else saved
        return (dialog, (), page, offsets, new_focus, new_pending, new_saved)

    for c in here[offsets[page] : offsets[page] + ROWS]:
        g = env._g_control.index(c) if c in env._g_control else -1
        if env._c_kind[c] == KIND_CHECK:
            out.append(
                edit(g, not pending[g], -1) if g >= 0 else (dialog, (), page, offsets, -1, pending, saved)
            )
        else:
            out.append((dialog, (), page, offsets, c if g >= 0 else -1, pending, saved))
    if focus >= 0:
        g = env._g_control.index(focus)
        out += [edit(g, True, focus), edit(g, False, focus)]  # type the target, or another value
    return out


def bfs_distance(env: GUIEnv, limit: int) -> int | None:
    """Shortest number of commands to success from the env's current state, or None beyond limit."""
    return shortest_distance(current_state(env), lambda s: _moves(env, s), lambda s: all(s[6]), limit)
