"""Dynamics of RLA-GUI-v0 over a small abstract state, shared by the step and the oracle.

The core state is ``(dialog, path, page, offsets, focus, pw, cw)``: the open dialog (-1:
none), the open menu path, the dialog's page, its per-page scroll offsets, the focused
control (-1: none), and bit masks of the goal settings that are wrong pending and saved.
"""

from __future__ import annotations

from typing import Any

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


class GUIDynamics(GUIApp):
    """Mixin of :class:`~rla_gym.envs.gui.env.GUIEnv`: successor, step and action mask."""

    _core: tuple[Any, ...]
    _committed: list[int]
    _pending: list[int]
    _mask_memo: dict[tuple[Any, ...], list[int]]

    def _successor(self, core: tuple[Any, ...], action: int) -> tuple[Any, ...]:
        """The abstract state after an admissible ``action`` (shared by the step and the oracle)."""
        if action == WAIT_:
            return core
        if core[0] < 0:
            return self._menu_successor(core[1], core[6], action)
        return self._dialog_successor(core, action)

    def _menu_successor(self, path: tuple[int, ...], cw: int, action: int) -> tuple[Any, ...]:
        """The state after ``action`` in the main window with the menus of ``path`` open."""
        if action < LEVEL_:
            top = self._top[action]
            return (-1, () if path[:1] == (top,) else (top,), 0, (), -1, 0, cw)
        if action == ESCAPE_:
            return (-1, path[:-1], 0, (), -1, 0, cw)
        level, i = divmod(action - LEVEL_, ITEMS)
        node = self._n_children[path[level]][i]
        kind = self._n_kind[node]
        if kind == NODE_SUB:
            return (-1, (*path[: level + 1], node), 0, (), -1, 0, cw)
        if kind == NODE_COMMAND:
            return (-1, (), 0, (), -1, 0, cw)
        opened = self._n_dialog[node]
        return (opened, (), 0, self._zeros[opened], -1, cw & self._d_mask[opened], cw)

    def _dialog_successor(self, core: tuple[Any, ...], action: int) -> tuple[Any, ...]:
        """The state after a non-wait ``action`` with a dialog open."""
        dialog, _, page, offsets, focus, pw, cw = core
        if action in (OK_, ENTER_):
            mask = self._d_mask[dialog]
            return (-1, (), 0, (), -1, 0, (cw & ~mask) | (pw & mask))
        if action in (CANCEL_, ESCAPE_):
            return (-1, (), 0, (), -1, 0, cw)
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
        dialog, _, page, offsets, focus = self._core[:5]
        if action in (OK_, ENTER_) and dialog >= 0:
            self._committed = self._pending
        elif ROW_ <= action < OK_:
            c = self._d_pages[dialog][page][offsets[page] + action - ROW_]
            if self._c_kind[c] == KIND_CHECK:
                self._pending[c] = OFF if self._pending[c] == ON else ON
        elif TYPE_ <= action < ENTER_:
            self._pending[focus] = VALUE_TOKENS[action - TYPE_]
        self._core = self._successor(self._core, action)
        if dialog < 0 <= self._core[0]:  # a dialog edits a copy of the saved settings, or them
            self._pending = self._committed if self._knobs.instant_apply else self._committed[:]

    def _screen_key(self) -> tuple[Any, ...]:
        """What admissibility depends on: the core less the goal bits, and the focused value."""
        dialog, path, page, offsets, focus = self._core[:5]
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
        dialog, path, page, offsets, focus = self._core[:5]
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
        return self._core[6] == 0
