"""Dynamics of RLA-GUI-v0 over a small abstract state, shared by the step and the oracle."""

from __future__ import annotations

from typing import Any, Final

from rla_gym.envs.gui.app import GUIApp
from rla_gym.envs.gui.layout import (
    ACTION_NAMES,
    CANCEL_,
    ENTER_,
    ESCAPE_,
    ITEMS,
    KIND_CHECK,
    KIND_NUMBER,
    LEVEL_,
    NEXT_TAB_,
    NODE_COMMAND,
    NODE_SUB,
    NUMBERS,
    OFF,
    OK_,
    ON,
    ROW_,
    ROWS,
    SCROLL_DOWN_,
    SCROLL_UP_,
    TAB_,
    TYPE_,
    VALUE_TOKENS,
    WAIT_,
)

#: The abstract state the step, the oracle and the screen derive from: ``(dialog, path, page,
#: offsets, focus, wrong_pending, wrong_saved)``: the open dialog (-1: none, the main window),
#: the open menu path, the dialog's tab page, its per-page scroll offsets, the focused control
#: (-1: none), and bit masks of the goal settings wrong in the dialog's pending copy and as
#: saved (0: success). A plain tuple, read through the positions below or by unpacking: the
#: step and the oracle build and unpack several per step, and a NamedTuple (unpacked and
#: indexed about 4x slower by CPython 3.11) made the env step about 8% slower.
GUICore = tuple[int, tuple[int, ...], int, tuple[int, ...], int, int, int]
# Positions of the fields in a GUICore (Final: the type checker knows each field's type)
DIALOG: Final = 0
PATH: Final = 1
PAGE: Final = 2
OFFSETS: Final = 3
FOCUS: Final = 4
WRONG_PENDING: Final = 5
WRONG_SAVED: Final = 6


def main_window(path: tuple[int, ...], wrong_saved: int) -> GUICore:
    """The core with no dialog open and the menus of ``path`` open."""
    return (-1, path, 0, (), -1, 0, wrong_saved)


class GUIDynamics(GUIApp):
    """Mixin of :class:`~rla_gym.envs.gui.env.GUIEnv`: successor, step and action mask."""

    _core: GUICore
    _committed: list[int]
    _pending: list[int]
    _mask_memo: dict[tuple[Any, ...], list[int]]

    def _successor(self, core: GUICore, action: int) -> GUICore:
        """The abstract state after an admissible ``action`` (shared by the step and the oracle)."""
        if action == WAIT_:
            return core
        if core[DIALOG] < 0:
            return self._menu_successor(core[PATH], core[WRONG_SAVED], action)
        return self._dialog_successor(core, action)

    def _menu_successor(self, path: tuple[int, ...], cw: int, action: int) -> GUICore:
        """The state after ``action`` in the main window with the menus of ``path`` open."""
        if action < LEVEL_:
            top = self._top[action]
            return main_window(() if path[:1] == (top,) else (top,), cw)
        if action == ESCAPE_:
            return main_window(path[:-1], cw)
        level, i = divmod(action - LEVEL_, ITEMS)
        node = self._n_children[path[level]][i]
        kind = self._n_kind[node]
        if kind == NODE_SUB:
            return main_window((*path[: level + 1], node), cw)
        if kind == NODE_COMMAND:
            return main_window((), cw)
        opened = self._n_dialog[node]
        return (opened, (), 0, self._zeros[opened], -1, cw & self._d_mask[opened], cw)

    def _dialog_successor(self, core: GUICore, action: int) -> GUICore:
        """The state after a non-wait ``action`` with a dialog open."""
        dialog, _, page, offsets, focus, pw, cw = core
        if action in (OK_, ENTER_):
            mask = self._d_mask[dialog]
            return main_window((), (cw & ~mask) | (pw & mask))
        if action in (CANCEL_, ESCAPE_):
            return main_window((), cw)
        if TAB_ <= action < ROW_ or action == NEXT_TAB_:
            new_page = action - TAB_ if action < ROW_ else (page + 1) % len(offsets)
            return (dialog, (), new_page, offsets, -1, pw, cw)
        if action < OK_:
            c = self._d_pages[dialog][page][offsets[page] + action - ROW_]
            g = self._goal_of.get(c)
            if g is not None and self._c_kind[c] == KIND_CHECK:
                pw ^= 1 << g
                cw = cw ^ 1 << g if self._knobs.instant_apply else cw
            return (dialog, (), page, offsets, c, pw, cw)
        if action < ENTER_:
            g = self._goal_of.get(focus)
            if g is not None:
                bit = 1 << g
                pw = pw & ~bit if VALUE_TOKENS[action - TYPE_] == self._g_target[g] else pw | bit
                if self._knobs.instant_apply:
                    cw = (cw & ~bit) | (pw & bit)
            return (dialog, (), page, offsets, focus, pw, cw)
        step = -1 if action == SCROLL_UP_ else 1
        offsets = (*offsets[:page], offsets[page] + step, *offsets[page + 1 :])
        return (dialog, (), page, offsets, focus, pw, cw)

    def _apply(self, action: int) -> None:
        dialog, _, page, offsets, focus, _, _ = self._core
        if action in (OK_, ENTER_) and dialog >= 0:
            self._committed = self._pending
        elif ROW_ <= action < OK_:
            c = self._d_pages[dialog][page][offsets[page] + action - ROW_]
            if self._c_kind[c] == KIND_CHECK:
                self._pending[c] = OFF if self._pending[c] == ON else ON
        elif TYPE_ <= action < ENTER_:
            self._pending[focus] = VALUE_TOKENS[action - TYPE_]
        self._core = self._successor(self._core, action)
        if dialog < 0 <= self._core[DIALOG]:  # a dialog edits a copy of the saved settings, or them
            self._pending = self._committed if self._knobs.instant_apply else self._committed[:]

    def _screen_key(self) -> tuple[Any, ...]:
        """What admissibility depends on: the core less the goal bits, and the focused value."""
        dialog, path, page, offsets, focus, _, _ = self._core
        return (dialog, path, page, offsets, focus, self._pending[focus] if focus >= 0 else 0)

    def _action_mask(self) -> list[int]:
        key = self._screen_key()
        mask = self._mask_memo.get(key)
        if mask is None:
            mask = self._mask_memo[key] = self._compute_mask()
        return mask

    def _compute_mask(self) -> list[int]:
        mask = [0] * len(ACTION_NAMES)
        mask[WAIT_] = 1
        dialog, path, page, offsets, focus, _, _ = self._core
        if dialog < 0:
            for i in range(len(self._top)):
                mask[i] = 1
            for level, node in enumerate(path):
                start = LEVEL_ + level * ITEMS
                mask[start : start + len(self._n_children[node])] = [1] * len(self._n_children[node])
            if len(path) > 1:  # re-clicking the deepest open submenu would change nothing
                mask[LEVEL_ + (len(path) - 2) * ITEMS + self._n_children[path[-2]].index(path[-1])] = 0
            mask[ESCAPE_] = 1 if path else 0
            return mask
        pages = self._d_pages[dialog]
        for p in range(len(pages)):
            mask[TAB_ + p] = p != page
        mask[NEXT_TAB_] = len(pages) > 1
        controls, offset = pages[page], offsets[page]
        for r in range(min(ROWS, len(controls) - offset)):
            mask[ROW_ + r] = controls[offset + r] != focus or self._c_kind[focus] == KIND_CHECK
        mask[OK_] = 1
        # an instant-apply panel has a close button only: no cancel, no default button, no escape
        mask[CANCEL_] = mask[ENTER_] = mask[ESCAPE_] = not self._knobs.instant_apply
        mask[SCROLL_UP_] = offset > 0
        mask[SCROLL_DOWN_] = offset + ROWS < len(controls)
        if focus >= 0 and self._c_kind[focus] != KIND_CHECK:
            numbers = self._c_kind[focus] == KIND_NUMBER
            for v, token in enumerate(VALUE_TOKENS):
                mask[TYPE_ + v] = (v < len(NUMBERS)) == numbers and token != self._pending[focus]
        return mask

    def _success(self) -> bool:
        return self._core[WRONG_SAVED] == 0
