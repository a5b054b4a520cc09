"""Generation of an RLA-GUI-v0 application: menus, dialogs with tab pages of settings, goals."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

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

T = TypeVar("T")
# the words generation draws from, as token ids (a sample of ids draws what one of words does)
_TOPS = range(len(TOP_WORDS))
_TOP_TOKENS = tuple(TOKEN_ID[w] for w in TOP_WORDS)
_SUB_TOKENS = tuple(TOKEN_ID[w] for w in SUB_WORDS)
_DIALOG_TOKENS = tuple(TOKEN_ID[w] for w in DIALOG_WORDS)
_COMMAND_TOKENS = tuple(TOKEN_ID[w] for w in COMMAND_WORDS)
_TAB_TOKENS = tuple(TOKEN_ID[w] for w in TAB_WORDS)
_LABELS = range(len(LABEL_A) * len(LABEL_B))
_LABEL_TOKENS = tuple((TOKEN_ID[a], TOKEN_ID[b]) for a in LABEL_A for b in LABEL_B)


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
        getrandbits = rng.getrandbits
        tops = sorted(_sample(getrandbits, _TOPS, k.top_menus))
        count = len(tops)
        kinds, labels = [NODE_TOP] * count, [_TOP_TOKENS[t] for t in tops]
        children: list[list[int]] = [[] for _ in range(count)]
        dialogs = [-1] * count
        self._n_kind, self._n_label, self._n_children, self._n_dialog = kinds, labels, children, dialogs
        top_nodes = self._top = list(range(count))
        sub_words = _sample(getrandbits, _SUB_TOKENS, len(SUB_WORDS))
        d_label = self._d_label = _sample(getrandbits, _DIALOG_TOKENS, k.dialogs)
        d_path: list[tuple[int, ...]] = []
        self._d_path = d_path
        rand, menu_depth, goal_dialogs, cap = rng.random, k.menu_depth, k.goal_dialogs, k.items_per_menu
        for dialog in range(k.dialogs):
            depth = menu_depth if dialog < goal_dialogs else 1 + int(rand() * menu_depth)
            if depth > 1:
                d_path.append(self._place_opener(dialog, depth, k, sub_words, rng))
                continue
            for _ in range(1000):  # _place_opener in a top menu, inlined (the same draws)
                node = top_nodes[int(rand() * count)]
                items = children[node]
                if len(items) < cap:
                    items.append(len(kinds))
                    kinds.append(NODE_OPENER)
                    labels.append(d_label[dialog])
                    children.append([])
                    dialogs.append(dialog)
                    d_path.append((node,))
                    break
            else:
                raise RuntimeError(f"no room for dialog {dialog} in the menus of {k}")
        for node in range(len(kinds)):
            if kinds[node] <= NODE_SUB:  # a top menu or a submenu: commands fill it up
                items = children[node]
                first, fill = len(kinds), cap - len(items)
                labels += _sample(getrandbits, _COMMAND_TOKENS, fill)
                kinds += [NODE_COMMAND] * fill
                children += [[] for _ in range(fill)]
                dialogs += [-1] * fill
                items += range(first, first + fill)
                _shuffle(getrandbits, items)

    def _place_opener(
        self, dialog: int, depth: int, k: GUIKnobs, sub_words: list[int], rng: random.Random
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

    def _descend(self, depth: int, cap: int, sub_words: list[int], rng: random.Random) -> list[int]:
        """A random menu path of up to ``depth`` menus, entering or adding submenus (pops the
        submenu labels ``sub_words``)."""
        children = self._n_children
        node = self._top[int(rng.random() * len(self._top))]
        path = [node]
        for _level in range(1, depth):
            subs = [c for c in children[node] if self._n_kind[c] == NODE_SUB]
            room = len(children[node]) < cap
            if subs and (not room or rng.random() < 0.5):
                node = subs[int(rng.random() * len(subs))]
            elif room and sub_words:
                sub = self._add_node(NODE_SUB, sub_words.pop())
                children[node].append(sub)
                node = sub
            else:
                break
            path.append(node)
        return path

    def _build_dialogs(self, k: GUIKnobs, rng: random.Random) -> None:
        getrandbits, rand = rng.getrandbits, rng.random
        self._d_tabs = [_sample(getrandbits, _TAB_TOKENS, k.tabs) for _ in range(k.dialogs)]
        # the page layout depends on the knobs alone: shared, read-only
        self._d_pages, self._zeros, self._c_row, self._c_page = _pages(k.dialogs, k.tabs, k.controls)
        count = k.dialogs * k.tabs * k.controls
        self._c_label = _sample(getrandbits, _LABEL_TOKENS, count)  # what sampling _LABELS draws
        # each control's kind, then its value (_random_value, inlined: a world has up to 160)
        kinds: list[int] = []
        values: list[int] = []
        self._c_kind, self._initial = kinds, values
        kind, value = kinds.append, values.append
        numbers, words = len(NUMBERS), len(WORDS)
        for _ in range(count):
            u = rand()
            if u < 0.5:
                kind(KIND_CHECK)
                value(ON if rand() < 0.5 else OFF)
            elif u < 0.8:
                kind(KIND_NUMBER)
                value(VALUE_TOKENS[int(rand() * numbers)])
            else:
                kind(KIND_WORD)
                value(VALUE_TOKENS[numbers + int(rand() * words)])

    def _place_goals(self, k: GUIKnobs, rng: random.Random) -> None:
        rand, kinds, initial, pages = rng.random, self._c_kind, self._initial, self._d_pages
        controls: list[int] = []
        targets: list[int] = []
        goal_dialogs: list[int] = []
        share, tabs, dialogs = k.field_share, k.tabs, k.goal_dialogs
        for g in range(k.goals):
            dialog = g % dialogs
            want_field = rand() < share
            page = pages[dialog][int(rand() * tabs)]
            free = [c for c in page if c not in controls]
            fits = [c for c in free if (kinds[c] != KIND_CHECK) == want_field]
            if fits:
                c = fits[int(rand() * len(fits))]
            else:  # the page lacks that kind: turn a free control into one
                c = free[int(rand() * len(free))]
                kinds[c] = KIND_NUMBER if want_field else KIND_CHECK
                initial[c] = _random_value(kinds[c], rng)
            kind, target = kinds[c], initial[c]
            while target == initial[c]:
                target = _random_value(kind, rng)
            controls.append(c)
            targets.append(target)
            goal_dialogs.append(dialog)
        self._g_control, self._g_target, self._g_dialog = controls, targets, goal_dialogs
        self._goal_of = {c: g for g, c in enumerate(controls)}
        d_goals: list[list[int]] = [[] for _ in range(k.dialogs)]
        d_mask = [0] * k.dialogs
        for g, dialog in enumerate(goal_dialogs):
            d_goals[dialog].append(g)
            d_mask[dialog] |= 1 << g
        self._d_goals, self._d_mask = d_goals, d_mask


@functools.lru_cache(maxsize=64)
def _pages(
    dialogs: int, tabs: int, controls: int
) -> tuple[list[list[list[int]]], list[tuple[int, ...]], list[int], list[int]]:
    """The control ids of each dialog's pages, the pages' zero scroll offsets, each control's
    row and page: fixed by the knobs."""
    per_dialog = tabs * controls
    pages = [
        [list(range(start, start + controls)) for start in range(first, first + per_dialog, controls)]
        for first in range(0, dialogs * per_dialog, per_dialog)
    ]
    rows = list(range(controls)) * (dialogs * tabs)
    page_of = [page for page in range(tabs) for _ in range(controls)] * dialogs
    return pages, [(0,) * tabs] * dialogs, rows, page_of


@functools.lru_cache(maxsize=256)
def _set_size(k: int) -> int:
    """CPython ``sample``'s threshold between a pool and a set of indices, for ``k`` draws."""
    return 21 + (4 ** math.ceil(math.log(k * 3, 4)) if k > 5 else 0)


def _sample(getrandbits: Callable[[int], int], population: Sequence[T], k: int) -> list[T]:
    """``random.Random.sample(population, k)`` of the generator whose ``getrandbits`` this is: the
    same draws, the same result (CPython's algorithm, with its ``_randbelow`` inlined, since a
    world draws a dozen samples)."""
    n = len(population)
    result: list[T] = []
    if n <= _set_size(k):  # a pool of the population
        pool = list(population)
        append = result.append
        for m in range(n, n - k, -1):
            bits = m.bit_length()
            j = getrandbits(bits)
            while j >= m:
                j = getrandbits(bits)
            append(pool[j])
            pool[j] = pool[m - 1]
    else:  # a set of the indices drawn
        selected: set[int] = set()
        bits = n.bit_length()
        for _ in range(k):
            j = getrandbits(bits)
            while j >= n or j in selected:
                j = getrandbits(bits)
            selected.add(j)
            result.append(population[j])
    return result


def _shuffle(getrandbits: Callable[[int], int], x: list[Any]) -> None:
    """``random.Random.shuffle(x)`` of the generator whose ``getrandbits`` this is (same draws)."""
    for i in range(len(x) - 1, 0, -1):
        bits = (i + 1).bit_length()
        j = getrandbits(bits)
        while j > i:
            j = getrandbits(bits)
        x[i], x[j] = x[j], x[i]


def _random_value(kind: int, rng: random.Random) -> int:
    """A random initial or target value (a token id) of a control kind."""
    if kind == KIND_CHECK:
        return ON if rng.random() < 0.5 else OFF
    if kind == KIND_NUMBER:
        return VALUE_TOKENS[int(rng.random() * len(NUMBERS))]
    return VALUE_TOKENS[len(NUMBERS) + int(rng.random() * len(WORDS))]
