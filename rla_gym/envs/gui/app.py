"""Generation of an RLA-GUI-v0 application: menus, dialogs with tab pages of settings, goals."""

from __future__ import annotations

import random

from rla_gym.envs.gui.knobs import GUIKnobs
from rla_gym.envs.gui.layout import (
    COMMAND_WORDS,
    DIALOG_WORDS,
    KIND_CHECK,
    KIND_NUMBER,
    KIND_WORD,
    LABEL_A,
    LABEL_B,
    NODE_COMMAND,
    NODE_OPENER,
    NODE_SUB,
    NODE_TOP,
    NUMBERS,
    OFF,
    ON,
    SUB_WORDS,
    TAB_WORDS,
    TOKEN_ID,
    TOP_WORDS,
    VALUE_TOKENS,
    WORDS,
)


class GUIApp:
    """Mixin of :class:`~rla_gym.envs.gui.env.GUIEnv`: builds the widget tree of one task.

    Nodes (``_n_*``) are menus, submenus, commands and dialog openers; dialogs (``_d_*``)
    hold tab pages of controls (``_c_*``); goals (``_g_*``) name a control and its target.
    """

    _knobs: GUIKnobs
    _n_kind: list[int]
    _n_label: list[int]
    _n_children: list[list[int]]
    _n_dialog: list[int]
    _top: list[int]
    _d_label: list[int]
    _d_path: list[tuple[int, ...]]
    _d_tabs: list[list[int]]
    _d_pages: list[list[list[int]]]
    _zeros: list[tuple[int, ...]]
    _c_kind: list[int]
    _c_label: list[tuple[int, int]]
    _c_row: list[int]
    _c_page: list[int]
    _initial: list[int]
    _g_control: list[int]
    _g_target: list[int]
    _g_dialog: list[int]
    _goal_of: dict[int, int]
    _d_goals: list[list[int]]
    _d_mask: list[int]

    def _add_node(self, kind: int, label: int, dialog: int = -1) -> int:
        self._n_kind.append(kind)
        self._n_label.append(label)
        self._n_children.append([])
        self._n_dialog.append(dialog)
        return len(self._n_kind) - 1

    def _build_menus(self, k: GUIKnobs, rng: random.Random) -> None:
        self._n_kind = []
        self._n_label = []
        self._n_children = []
        self._n_dialog = []
        tops = sorted(rng.sample(range(len(TOP_WORDS)), k.top_menus))
        self._top = [self._add_node(NODE_TOP, TOKEN_ID[TOP_WORDS[t]]) for t in tops]
        sub_words = rng.sample(SUB_WORDS, len(SUB_WORDS))
        self._d_label = [TOKEN_ID[w] for w in rng.sample(DIALOG_WORDS, k.dialogs)]
        self._d_path = []
        for dialog in range(k.dialogs):
            depth = k.menu_depth if dialog < k.goal_dialogs else 1 + int(rng.random() * k.menu_depth)
            self._d_path.append(self._place_opener(dialog, depth, k, sub_words, rng))
        cap, children = k.items_per_menu, self._n_children
        for node in range(len(self._n_kind)):
            if self._n_kind[node] in (NODE_TOP, NODE_SUB):
                words = rng.sample(COMMAND_WORDS, cap - len(children[node]))
                children[node] += [self._add_node(NODE_COMMAND, TOKEN_ID[w]) for w in words]
                rng.shuffle(children[node])

    def _place_opener(
        self, dialog: int, depth: int, k: GUIKnobs, sub_words: list[str], rng: random.Random
    ) -> tuple[int, ...]:
        """Add the menu item opening ``dialog`` ``depth`` menus deep; the menu path to it."""
        cap, children = k.items_per_menu, self._n_children
        for _ in range(1000):  # random descent; a full menu or no free submenu label retries
            path = self._descend(depth, cap, sub_words, rng)
            node = path[-1]
            if len(path) == depth and len(children[node]) < cap:
                children[node].append(self._add_node(NODE_OPENER, self._d_label[dialog], dialog))
                return tuple(path)
        raise RuntimeError(f"no room for dialog {dialog} in the menus of {k}")

    def _descend(self, depth: int, cap: int, sub_words: list[str], rng: random.Random) -> list[int]:
        """A random menu path of up to ``depth`` menus, entering or adding submenus (pops ``sub_words``)."""
        children = self._n_children
        node = self._top[int(rng.random() * len(self._top))]
        path = [node]
        for _level in range(1, depth):
            subs = [c for c in children[node] if self._n_kind[c] == NODE_SUB]
            room = len(children[node]) < cap
            if subs and (not room or rng.random() < 0.5):
                node = subs[int(rng.random() * len(subs))]
            elif room and sub_words:
                sub = self._add_node(NODE_SUB, TOKEN_ID[sub_words.pop()])
                children[node].append(sub)
                node = sub
            else:
                break
            path.append(node)
        return path

    def _build_dialogs(self, k: GUIKnobs, rng: random.Random) -> None:
        self._d_tabs = [[TOKEN_ID[w] for w in rng.sample(TAB_WORDS, k.tabs)] for _ in range(k.dialogs)]
        self._d_pages = []
        self._zeros = [(0,) * k.tabs] * k.dialogs
        labels = rng.sample(range(len(LABEL_A) * len(LABEL_B)), k.dialogs * k.tabs * k.controls)
        self._c_kind = []
        self._c_label = []
        self._c_row = []
        self._c_page = []
        self._initial = []
        for _dialog in range(k.dialogs):
            pages = []
            for page in range(k.tabs):
                ids = []
                for row in range(k.controls):
                    c = len(self._c_kind)
                    a, b = divmod(labels[c], len(LABEL_B))
                    u = rng.random()
                    kind = KIND_CHECK if u < 0.5 else KIND_NUMBER if u < 0.8 else KIND_WORD
                    self._c_kind.append(kind)
                    self._c_label.append((TOKEN_ID[LABEL_A[a]], TOKEN_ID[LABEL_B[b]]))
                    self._c_row.append(row)
                    self._c_page.append(page)
                    self._initial.append(_random_value(kind, rng))
                    ids.append(c)
                pages.append(ids)
            self._d_pages.append(pages)

    def _place_goals(self, k: GUIKnobs, rng: random.Random) -> None:
        self._g_control = []
        self._g_target = []
        self._g_dialog = []
        for g in range(k.goals):
            dialog = g % k.goal_dialogs
            want_field = rng.random() < k.field_share
            page = self._d_pages[dialog][int(rng.random() * k.tabs)]
            free = [c for c in page if c not in self._g_control]
            fits = [c for c in free if (self._c_kind[c] != KIND_CHECK) == want_field]
            if fits:
                c = fits[int(rng.random() * len(fits))]
            else:  # the page lacks that kind: turn a free control into one
                c = free[int(rng.random() * len(free))]
                self._c_kind[c] = KIND_NUMBER if want_field else KIND_CHECK
                self._initial[c] = _random_value(self._c_kind[c], rng)
            target = self._initial[c]
            while target == self._initial[c]:
                target = _random_value(self._c_kind[c], rng)
            self._g_control.append(c)
            self._g_target.append(target)
            self._g_dialog.append(dialog)
        self._goal_of = {c: g for g, c in enumerate(self._g_control)}
        self._d_goals = [[g for g in range(k.goals) if self._g_dialog[g] == d] for d in range(k.dialogs)]
        self._d_mask = [sum(1 << g for g in goals) for goals in self._d_goals]


def _random_value(kind: int, rng: random.Random) -> int:
    """A random initial or target value (a token id) of a control kind."""
    if kind == KIND_CHECK:
        return ON if rng.random() < 0.5 else OFF
    if kind == KIND_NUMBER:
        return VALUE_TOKENS[int(rng.random() * len(NUMBERS))]
    return VALUE_TOKENS[len(NUMBERS) + int(rng.random() * len(WORDS))]
