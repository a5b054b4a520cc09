"""Observations of RLA-GUI-v0: the token accessibility tree and its English text."""

from __future__ import annotations

from typing import Any

from rla_gym.envs.gui.dynamics import GUIDynamics
from rla_gym.envs.gui.layout import (
    ACTIVE,
    CANCEL_,
    CHECKBOX,
    DISABLED,
    FIELD,
    FOCUSED,
    GOAL_TOKENS,
    ITEMS,
    KIND_CHECK,
    LEVEL_,
    LEVELS,
    MAX_GOALS,
    MENU,
    MENUBAR_SLOTS,
    MORE,
    NODE_ROLE,
    NONE,
    OK_,
    ON,
    OPEN,
    ROW_,
    ROWS,
    SLOT_TOKENS,
    TAB,
    TAB_,
    TAB_SLOTS,
    TOKEN_ID,
    TOKEN_LENGTH,
    UNKNOWN,
    VOCAB,
)


class GUIObservation(GUIDynamics):
    """Mixin of :class:`~rla_gym.envs.gui.env.GUIEnv`: instruction, tokens and text."""

    _instruction: list[int]
    _buttons: list[int]
    _token_cache: dict[Any, list[int]]

    def _make_instruction(self) -> list[int]:
        level = self._knobs.ambiguity
        tokens: list[int] = []
        for g, c in enumerate(self._g_control):
            target, dialog = self._g_target[g], self._g_dialog[g]
            if self._c_kind[c] == KIND_CHECK:
                head = [TOKEN_ID["check"] if target == ON else TOKEN_ID["uncheck"], *self._c_label[c], NONE]
            else:
                head = [TOKEN_ID["set"], *self._c_label[c], target]
            menus = ([self._n_label[n] for n in self._d_path[dialog]] + [NONE] * LEVELS)[:LEVELS]
            tab = self._d_tabs[dialog][self._c_page[c]]
            if level >= 2:  # the path through the menus goes unsaid
                menus = [UNKNOWN] * LEVELS
            tokens += (
                head
                + menus
                + [UNKNOWN if level >= 3 else self._d_label[dialog], UNKNOWN if level >= 1 else tab]
            )
        return tokens + [0] * (MAX_GOALS * GOAL_TOKENS - len(tokens))

    def _tokens(self) -> list[int]:
        dialog, path, page, offsets, focus, _, _ = self._core
        if dialog < 0:
            screen = self._token_cache.get(path)
            if screen is None:
                screen = self._token_cache[path] = self._menu_tokens(path)
            return self._instruction + screen
        static = self._token_cache.get((dialog, page))
        if static is None:
            static = self._token_cache[(dialog, page)] = self._dialog_tokens(dialog, page)
        controls, offset, pending = self._d_pages[dialog][page], offsets[page], self._pending
        tokens = self._instruction + static[:1]
        tokens += [MORE if offset > 0 else NONE, MORE if offset + ROWS < len(controls) else NONE]
        tokens += [*self._c_label[focus], pending[focus]] if focus >= 0 else [NONE, NONE, NONE]
        tokens += static[1:]
        for c in controls[offset : offset + ROWS]:
            role = CHECKBOX if self._c_kind[c] == KIND_CHECK else FIELD
            tokens += [role, *self._c_label[c], pending[c], FOCUSED if c == focus else NONE]
        tokens += [0] * (SLOT_TOKENS * max(0, offset + ROWS - len(controls)))
        return tokens + self._buttons

    def _menu_tokens(self, path: tuple[int, ...]) -> list[int]:
        """Header and element slots of the main window with the menus of ``path`` open."""
        tokens = [TOKEN_ID["main"], NONE, NONE, NONE, NONE, NONE]
        for node in self._top:
            tokens += [MENU, self._n_label[node], NONE, NONE, OPEN if path[:1] == (node,) else NONE]
        tokens += [0] * (SLOT_TOKENS * (MENUBAR_SLOTS - len(self._top)))
        for level, node in enumerate(path):
            children = self._n_children[node]
            for child in children:
                is_open = level + 1 < len(path) and path[level + 1] == child
                role = NODE_ROLE[self._n_kind[child]]
                tokens += [role, self._n_label[child], NONE, NONE, OPEN if is_open else NONE]
            tokens += [0] * (SLOT_TOKENS * (ITEMS - len(children)))
        return tokens + [0] * (TOKEN_LENGTH - MAX_GOALS * GOAL_TOKENS - len(tokens))

    def _dialog_tokens(self, dialog: int, page: int) -> list[int]:
        """Title, then menu bar (disabled), empty menu levels and tabs of an open dialog."""
        tokens = [self._d_label[dialog]]
        for node in self._top:
            tokens += [MENU, self._n_label[node], NONE, NONE, DISABLED]
        tokens += [0] * (SLOT_TOKENS * (MENUBAR_SLOTS - len(self._top) + LEVELS * ITEMS))
        for p, label in enumerate(self._d_tabs[dialog]):
            tokens += [TAB, label, NONE, NONE, ACTIVE if p == page else NONE]
        return tokens + [0] * (SLOT_TOKENS * (TAB_SLOTS - len(self._d_tabs[dialog])))

    def _text(self) -> str:
        dialog, path, page, offsets, focus, _, _ = self._core
        lines = [self._task_text()]
        if dialog < 0:
            lines += self._menu_lines(path)
        else:
            lines += self._dialog_lines(dialog, page, offsets, focus)
        return "\n".join(lines)

    def _menu_lines(self, path: tuple[int, ...]) -> list[str]:
        """The main window with the menus of ``path`` open, as lines of English."""
        lines = ["Screen: main window."]
        bar = [
            f"[{i}] menu {VOCAB[self._n_label[n]]}" + _opened(path[:1] == (n,))
            for i, n in enumerate(self._top)
        ]
        lines.append("Menu bar: " + ", ".join(bar) + ".")
        for level, node in enumerate(path):
            items = []
            for i, child in enumerate(self._n_children[node]):
                is_open = level + 1 < len(path) and path[level + 1] == child
                role = VOCAB[NODE_ROLE[self._n_kind[child]]]
                items.append(
                    f"[{LEVEL_ + level * ITEMS + i}] {role} {VOCAB[self._n_label[child]]}" + _opened(is_open)
                )
            lines.append(f"Menu {VOCAB[self._n_label[node]]}: " + ", ".join(items) + ".")
        return lines

    def _dialog_lines(self, dialog: int, page: int, offsets: tuple[int, ...], focus: int) -> list[str]:
        """The open ``dialog`` on ``page`` (its visible rows, buttons and focus) as lines of English."""
        lines = [f"Screen: dialog {VOCAB[self._d_label[dialog]]}; menu bar disabled."]
        tabs = [
            f"[{TAB_ + p}] tab {VOCAB[t]}" + (" (active)" if p == page else "")
            for p, t in enumerate(self._d_tabs[dialog])
        ]
        lines.append("Tabs: " + ", ".join(tabs) + ".")
        controls, offset = self._d_pages[dialog][page], offsets[page]
        shown = controls[offset : offset + ROWS]
        head = f"Rows {offset + 1}-{offset + len(shown)} of {len(controls)}"
        head += ", more above" if offset > 0 else ""
        head += ", more below" if offset + ROWS < len(controls) else ""
        rows = [
            f"[{ROW_ + r}] {self._describe(c)}" + (" (focused)" if c == focus else "")
            for r, c in enumerate(shown)
        ]
        lines.append(head + ": " + "; ".join(rows) + ".")
        instant = self._knobs.instant_apply
        lines.append(f"Buttons: [{OK_}] close." if instant else f"Buttons: [{OK_}] ok, [{CANCEL_}] cancel.")
        if focus >= 0:
            lines.append(f"Focus: {self._describe(focus)}.")
        return lines

    def _describe(self, c: int) -> str:
        a, b = self._c_label[c]
        if self._c_kind[c] == KIND_CHECK:
            return f"checkbox '{VOCAB[a]} {VOCAB[b]}' {VOCAB[self._pending[c]]}"
        return f"field '{VOCAB[a]} {VOCAB[b]}' = {VOCAB[self._pending[c]]}"

    def _task_text(self) -> str:
        level, parts = self._knobs.ambiguity, []
        for g, c in enumerate(self._g_control):
            a, b = (VOCAB[t] for t in self._c_label[c])
            target, dialog = VOCAB[self._g_target[g]], self._g_dialog[g]
            if self._c_kind[c] == KIND_CHECK:
                phrase = f"{'check' if target == 'on' else 'uncheck'} '{a} {b}'"
            else:
                phrase = f"set '{a} {b}' to {target}"
            name = VOCAB[self._d_label[dialog]]
            menus = " > ".join(VOCAB[self._n_label[n]] for n in self._d_path[dialog])
            tab = VOCAB[self._d_tabs[dialog][self._c_page[c]]]
            phrase += (
                f" in {menus} > {name}, tab {tab}",
                f" in {menus} > {name}",
                f" in the {name} dialog",
                "",
            )[level]
            parts.append(phrase)
        end = " (changes apply at once)." if self._knobs.instant_apply else "; then press ok."
        return "Task: " + "; ".join(parts) + end


def _opened(flag: bool) -> str:
    return " (open)" if flag else ""
