"""RLA-GUI-v0: OSWorld / MiniWoB-like settings tasks in a synthetic application, no browser."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from rla_gym.core import RLAEnv, Task, check_difficulty
from rla_gym.envs.gui.layout import (
    ACTION_NAMES,
    ACTIVE,
    BUTTON,
    CANCEL_,
    CHECKBOX,
    COMMAND_WORDS,
    DIALOG_WORDS,
    DISABLED,
    ENTER_,
    ESCAPE_,
    FIELD,
    FOCUSED,
    GOAL_TOKENS,
    ITEMS,
    KIND_CHECK,
    KIND_NUMBER,
    KIND_WORD,
    LABEL_A,
    LABEL_B,
    LEVEL_,
    LEVELS,
    MAX_GOALS,
    MENU,
    MENUBAR_SLOTS,
    MORE,
    NEXT_TAB_,
    NODE_COMMAND,
    NODE_OPENER,
    NODE_ROLE,
    NODE_SUB,
    NODE_TOP,
    NONE,
    NUMBERS,
    OFF,
    OK_,
    ON,
    OPEN,
    ROW_,
    ROWS,
    SCROLL_DOWN_,
    SCROLL_UP_,
    SLOT_TOKENS,
    SUB_WORDS,
    TAB,
    TAB_,
    TAB_SLOTS,
    TAB_WORDS,
    TOKEN_ID,
    TOKEN_LENGTH,
    TOP_WORDS,
    TYPE_,
    UNKNOWN,
    VALUE_TOKENS,
    VOCAB,
    WAIT_,
    WORDS,
)
from rla_gym.envs.gui.screenshot import draw_screen


@dataclass(frozen=True)
class GUIKnobs:
    """Concrete generation knobs for one difficulty (see :func:`gui_knobs`)."""

    top_menus: int
    items_per_menu: int
    menu_depth: int
    start_open: str
    instant_apply: bool
    dialogs: int
    tabs: int
    controls: int
    goals: int
    goal_dialogs: int
    field_share: float
    ambiguity: int
    budget_factor: float
    budget_slack: int


def _half_up(x: float) -> int:
    """Round half up (Python's round() goes to even: round(2.5) == 2)."""
    return math.floor(x + 0.5)


def gui_knobs(difficulty: float) -> GUIKnobs:
    """The documented, monotone map from difficulty to knobs (the table in the docstring)."""
    d = check_difficulty(difficulty)
    return GUIKnobs(
        top_menus=1 + _half_up(5 * d),
        items_per_menu=2 + _half_up(4 * d),
        menu_depth=1 if d < 0.3 else 2 if d < 0.7 else 3,
        start_open="dialog" if d < 0.2 else "menus" if d < 0.4 else "nothing",
        instant_apply=d < 0.2,
        dialogs=1 + _half_up(3 * d),
        tabs=1 + _half_up(3 * d),
        controls=2 + _half_up(8 * d),
        goals=1 if d < 0.3 else 2 if d < 0.7 else 3,
        goal_dialogs=1 if d < 0.6 else 2,
        field_share=round(0.6 * d, 2),
        ambiguity=0 if d < 0.45 else 1 if d < 0.65 else 2 if d < 0.85 else 3,
        budget_factor=4.0 - 2.5 * d,
        budget_slack=_half_up(8 * (1 - d)),
    )


def scroll_cost(offset: int, lo: int, hi: int) -> int:
    """Fewest one-row scrolls from ``offset`` that show every row in [lo, hi] at some moment.

    Row r is visible at offsets [r - ROWS + 1, r]; the visited offsets form an interval
    that must reach down to lo and up to hi - ROWS + 1 (going one way first, then back).
    """
    up, down = offset - lo, hi - ROWS + 1 - offset
    if up <= 0:
        return max(down, 0)
    if down <= 0:
        return up
    return up + down + min(up, down)


class GUIEnv(RLAEnv):
    """Settings tasks in a synthetic desktop application (OSWorld / MiniWoB-like, no browser).

    ## Description
    The application is a widget tree: a menu bar, menus with commands, submenus and
    dialog openers ("preferences..."), and modal dialogs with tab pages of checkboxes
    and text fields in a scrollable pane (5 rows visible) above OK and Cancel buttons.
    The instruction asks for one to three settings ("set 'font size' to 14 in
    format > fonts, tab general; check 'line numbers' in ...; then press ok"). A
    dialog edits a pending copy of the settings: OK (or enter) saves it, Cancel (or
    escape) drops it. The task succeeds when every named setting is saved with its
    value. At the lowest difficulty the goal dialog starts open and applies changes at
    once (a settings panel with a close button only), so one click can succeed; a
    little higher the menus leading to it start open.

    ## Difficulty
    ``difficulty`` d in [0, 1] sets every knob through one monotone table
    (:func:`gui_knobs`):

    | knob | formula (round = half up) | d=0 | 0.25 | 0.5 | 0.75 | 1 |
    |---|---|---|---|---|---|---|
    | top menus | 1 + round(5d) | 1 | 2 | 4 | 5 | 6 |
    | items per menu | 2 + round(4d) | 2 | 3 | 4 | 5 | 6 |
    | menu depth (menus to open before the goal dialog's item) | 1 below .3, 2 below .7, else 3 | 1 | 1 | 2 | 3 | 3 |
    | open at the start | goal dialog below .2, its menus below .4, nothing | dialog | menus | nothing | nothing | nothing |
    | dialogs apply changes at once (no OK) | d < 0.2 | yes | no | no | no | no |
    | dialogs | 1 + round(3d) | 1 | 2 | 3 | 3 | 4 |
    | tab pages per dialog | 1 + round(3d) | 1 | 2 | 3 | 3 | 4 |
    | controls per page (5 visible, more scroll) | 2 + round(8d) | 2 | 4 | 6 | 8 | 10 |
    | settings to change | 1 below .3, 2 below .7, else 3 | 1 | 1 | 2 | 3 | 3 |
    | dialogs holding them | 1 below .6, else 2 | 1 | 1 | 1 | 2 | 2 |
    | share of text-field settings (others checkboxes) | 0.6d | 0 | .15 | .3 | .45 | .6 |
    | instruction names | full path below .45, no tab below .65, dialog only below .85, setting only | full path | full path | no tab | dialog only | setting only |
    | step budget | ceil(optimal_len * (4 - 2.5d)) + round(8 (1-d)) | 4x+8 | 3.4x+6 | 2.8x+4 | 2.1x+2 | 1.5x |

    Dialogs beyond the goal ones and the remaining menu items (commands) are
    distractors; distractor dialogs sit 1 to ``menu depth`` menus deep. Controls are
    checkboxes (1/2), number fields (3/10) or word fields (1/5).

    ## Observation
    ``obs_mode="dict"`` (default): ``tokens``, a ``Box(0, V-1, (208,), int64)`` of word
    ids in a fixed layout: instruction 3 x 9 (verb, label 2, value, top menu,
    submenu 2, dialog, tab; ``<unknown>`` where the instruction is silent), screen
    header 6 (title, more above, more below, focused label 2 and value), then 35
    element slots x 5 (role, label 2, value or state, flag open / active / focused /
    disabled): menu bar 6, three menu levels x 6, tabs 4, pane rows 5, OK, Cancel.
    It is the accessibility tree of what is visible now. ``"flat"``: tokens and
    ``action_mask`` in one float32 ``Box``. ``"text"``: the same content as English with
    the slot numbers. ``render_mode="rgb_array"``: a 160 x 240 screenshot drawn with
    numpy (boxes, coloured word bars, checkbox marks, yellow focus ring), 6k to 9k
    frames/s in random play on one shared core (static parts are cached per screen).

    ## Action
    ``Discrete(53)``: click element slot 0-34, type one of 12 values (8 numbers, 4
    words) into the focused text field, press enter (OK), escape (Cancel / close a
    menu level), tab (next tab page), scroll up, scroll down, wait. Masked to what is
    visible, enabled and would change something (``wait`` always); a masked command is
    a no-op flagged in ``info["invalid_action"]``. Number fields accept numbers, word
    fields words.

    ## Reward
    Sparse: 1.0 on the step that saves the last wrong setting, 0.0 otherwise. No shaping.

    ## Episode end
    Terminated on success (``is_success=True``, ``outcome=+1``); truncated when the
    step budget runs out (``outcome=-1``).

    ## Oracle
    Exact, in closed form over a small abstract state (menu path or open dialog,
    its page, per-page scroll offsets, focus, which goal settings are wrong pending
    and saved). Closed menus: every dialog with a wrong saved setting costs its menu
    clicks + one session + OK, less the longest open menu prefix of one of them; a
    session costs per page a tab click (unless current), the scroll distance
    (:func:`scroll_cost`) and 1 per checkbox, 2 per field (1 if focused). With a
    dialog open it is the best of Cancel, or fixing any subset of its wrong pending
    settings then OK, each followed by the closed-menu cost (dialogs that apply at
    once need no OK, only a close before the next dialog). Memoised per episode;
    tested against brute-force BFS. ``info["oracle_actions"]`` lists every command
    that lowers it by one.

    ## Version history
    - v0: initial release.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}  # noqa: RUF012
    env_id = "RLA-GUI-v0"
    vocab = VOCAB
    token_length = TOKEN_LENGTH
    action_names = ACTION_NAMES
    noop_action = WAIT_
    text_max_length = 2000
    text_charset = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:()'-[]>=\n"

    # ------------------------------------------------------------ generation
    def _generate(self, task: Task) -> None:
        k = gui_knobs(task.difficulty)
        self._knobs = k
        rng = random.Random(task.seed)
        self._build_menus(k, rng)
        self._build_dialogs(k, rng)
        self._place_goals(k, rng)
        self._committed = self._initial[:]
        self._pending: list[int] = []
        cw = (1 << len(self._g_control)) - 1
        self._core: tuple[Any, ...] = (-1, (), 0, (), -1, 0, cw)
        if k.start_open == "menus":  # the goal dialog's menus are open: its item is in sight
            self._core = (-1, self._d_path[0], 0, (), -1, 0, cw)
        if k.start_open == "dialog":
            self._pending = self._committed if k.instant_apply else self._committed[:]
            self._core = (0, (), 0, self._zeros[0], -1, cw, cw)
        self._memo: dict[tuple[Any, ...], int] = {}
        self._mask_memo: dict[tuple[Any, ...], list[int]] = {}
        self._oracle_memo: dict[tuple[Any, ...], list[int]] = {}
        self._rest_memo: dict[int, int] = {}
        self._token_cache: dict[Any, list[int]] = {}
        self._frame_cache: dict[Any, Any] = {}  # screenshot bases, see screenshot.py
        self._instruction = self._make_instruction()
        self._buttons = [BUTTON, TOKEN_ID["close"], NONE, NONE, NONE, 0, 0, 0, 0, 0] if k.instant_apply else [
            BUTTON, TOKEN_ID["ok"], NONE, NONE, NONE, BUTTON, TOKEN_ID["cancel"], NONE, NONE, NONE]  # fmt: skip

    def _add_node(self, kind: int, label: int, dialog: int = -1) -> int:
        self._n_kind.append(kind)
        self._n_label.append(label)
        self._n_children.append([])
        self._n_dialog.append(dialog)
        return len(self._n_kind) - 1

    def _build_menus(self, k: GUIKnobs, rng: random.Random) -> None:
        self._n_kind: list[int] = []
        self._n_label: list[int] = []
        self._n_children: list[list[int]] = []
        self._n_dialog: list[int] = []
        tops = sorted(rng.sample(range(len(TOP_WORDS)), k.top_menus))
        self._top = [self._add_node(NODE_TOP, TOKEN_ID[TOP_WORDS[t]]) for t in tops]
        sub_words = rng.sample(SUB_WORDS, len(SUB_WORDS))
        self._d_label = [TOKEN_ID[w] for w in rng.sample(DIALOG_WORDS, k.dialogs)]
        self._d_path: list[tuple[int, ...]] = []
        cap, children = k.items_per_menu, self._n_children
        for dialog in range(k.dialogs):
            depth = k.menu_depth if dialog < k.goal_dialogs else 1 + int(rng.random() * k.menu_depth)
            for _ in range(1000):  # random descent; a full menu or no free submenu label retries
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
                if len(path) == depth and len(children[node]) < cap:
                    children[node].append(self._add_node(NODE_OPENER, self._d_label[dialog], dialog))
                    self._d_path.append(tuple(path))
                    break
            else:
                raise RuntimeError(f"no room for dialog {dialog} in the menus of {k}")
        for node in range(len(self._n_kind)):
            if self._n_kind[node] in (NODE_TOP, NODE_SUB):
                words = rng.sample(COMMAND_WORDS, cap - len(children[node]))
                children[node] += [self._add_node(NODE_COMMAND, TOKEN_ID[w]) for w in words]
                rng.shuffle(children[node])

    def _build_dialogs(self, k: GUIKnobs, rng: random.Random) -> None:
        self._d_tabs = [[TOKEN_ID[w] for w in rng.sample(TAB_WORDS, k.tabs)] for _ in range(k.dialogs)]
        self._d_pages: list[list[list[int]]] = []
        self._zeros = [(0,) * k.tabs] * k.dialogs
        labels = rng.sample(range(len(LABEL_A) * len(LABEL_B)), k.dialogs * k.tabs * k.controls)
        self._c_kind: list[int] = []
        self._c_label: list[tuple[int, int]] = []
        self._c_row: list[int] = []
        self._c_page: list[int] = []
        self._initial: list[int] = []
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
        self._g_control: list[int] = []
        self._g_target: list[int] = []
        self._g_dialog: list[int] = []
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

    def _step_budget(self, optimal_len: int) -> int:
        return math.ceil(optimal_len * self._knobs.budget_factor) + self._knobs.budget_slack

    # ------------------------------------------------------------ dynamics
    def _successor(self, core: tuple[Any, ...], action: int) -> tuple[Any, ...]:
        """The abstract state after an admissible ``action`` (shared by the step and the oracle)."""
        dialog, path, page, offsets, focus, pw, cw = core
        if action == WAIT_:
            return core
        if dialog < 0:
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

    # ------------------------------------------------------------ oracle
    def _session(self, dialog: int, page: int, offsets: tuple[int, ...], focus: int, todo: int) -> int:
        """Commands to make the goal settings in ``todo`` right inside the open ``dialog``."""
        cost = 0
        spans: dict[int, list[int]] = {}
        for g in self._d_goals[dialog]:
            if not todo >> g & 1:
                continue
            c = self._g_control[g]
            if c == focus and self._c_kind[c] != KIND_CHECK:
                cost += 1  # type straight away: no click, no scrolling
                continue
            cost += 1 if self._c_kind[c] == KIND_CHECK else 2
            row, span = self._c_row[c], spans.get(self._c_page[c])
            if span is None:
                spans[self._c_page[c]] = [row, row]
            else:
                span[0], span[1] = min(span[0], row), max(span[1], row)
        for p, (lo, hi) in spans.items():
            cost += (p != page) + scroll_cost(offsets[p], lo, hi)
        return cost

    def _rest(self, cw: int, path: tuple[int, ...] = ()) -> int:
        """Commands to success from closed dialogs with menu ``path`` open."""
        if not path:
            cached = self._rest_memo.get(cw)
            if cached is not None:
                return cached
        total = prefix = 0
        for dialog in range(self._knobs.goal_dialogs):
            todo = cw & self._d_mask[dialog]
            if todo:
                menus = self._d_path[dialog]
                total += len(menus) + 2 + self._session(dialog, 0, self._zeros[dialog], -1, todo)
                n = 0
                while n < len(path) and n < len(menus) and path[n] == menus[n]:
                    n += 1
                prefix = max(prefix, n)
        if total and self._knobs.instant_apply:
            total -= 1  # the last edit succeeds at once: no close
        if not path:
            self._rest_memo[cw] = total
        return total - prefix

    def _cost(self, core: tuple[Any, ...]) -> int:
        dialog, path, page, offsets, focus, pw, cw = core
        if not cw:
            return 0
        if dialog < 0:
            key: tuple[Any, ...] = (path, cw)
        else:
            g = self._goal_of.get(focus, -1)
            useful = g >= 0 and pw >> g & 1 and self._c_kind[focus] != KIND_CHECK
            key = (dialog, page, offsets, focus if useful else -1, pw, cw)
        cost = self._memo.get(key)
        if cost is None:
            cost = self._memo[key] = self._plan(core)
        return cost

    def _plan(self, core: tuple[Any, ...]) -> int:
        dialog, path, page, offsets, focus, pw, cw = core
        if dialog < 0:
            return self._rest(cw, path)
        mask = self._d_mask[dialog]
        best = 1 + self._rest(cw)  # cancel
        wrong, others = pw & mask, cw & ~mask
        fix = wrong
        while True:  # fix any subset of the wrong pending settings, then OK (or close)
            left = others | (wrong & ~fix)
            close = 0 if self._knobs.instant_apply and not left else 1
            cost = self._session(dialog, page, offsets, focus, fix) + close + self._rest(left)
            best = min(best, cost)
            if not fix:
                return best
            fix = (fix - 1) & wrong

    def _distance(self) -> int:
        return self._cost(self._core)

    def _oracle_actions(self) -> list[int]:
        core = self._core
        key = (self._screen_key(), core[5], core[6])
        best = self._oracle_memo.get(key)
        if best is None:
            target = self._cost(core) - 1
            best = self._oracle_memo[key] = [
                a
                for a, ok in enumerate(self._mask_list)
                if ok and a != WAIT_ and target >= 0 and self._cost(self._successor(core, a)) == target
            ]
        return best[:]

    # ------------------------------------------------------------ observation
    def _tokens(self) -> list[int]:
        dialog, path, page, offsets, focus = self._core[:5]
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
        dialog, path, page, offsets, focus = self._core[:5]
        lines = [self._task_text()]
        if dialog < 0:
            lines.append("Screen: main window.")
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
                        f"[{LEVEL_ + level * ITEMS + i}] {role} {VOCAB[self._n_label[child]]}"
                        + _opened(is_open)
                    )
                lines.append(f"Menu {VOCAB[self._n_label[node]]}: " + ", ".join(items) + ".")
            return "\n".join(lines)
        pages = self._d_pages[dialog]
        lines.append(f"Screen: dialog {VOCAB[self._d_label[dialog]]}; menu bar disabled.")
        tabs = [
            f"[{TAB_ + p}] tab {VOCAB[t]}" + (" (active)" if p == page else "")
            for p, t in enumerate(self._d_tabs[dialog])
        ]
        lines.append("Tabs: " + ", ".join(tabs) + ".")
        controls, offset = pages[page], offsets[page]
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
        return "\n".join(lines)

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

    # ------------------------------------------------------------ rendering
    def render(self) -> Any:
        """``"rgb_array"``: a 160 x 240 screenshot (boxes, word bars, checkbox marks, yellow focus)."""
        if self.render_mode != "rgb_array":
            return super().render()
        if self._task is None:
            raise RuntimeError("render() called before reset()")
        return draw_screen(self)


def _opened(flag: bool) -> str:
    return " (open)" if flag else ""


def _random_value(kind: int, rng: random.Random) -> int:
    """A random initial or target value (a token id) of a control kind."""
    if kind == KIND_CHECK:
        return ON if rng.random() < 0.5 else OFF
    if kind == KIND_NUMBER:
        return VALUE_TOKENS[int(rng.random() * len(NUMBERS))]
    return VALUE_TOKENS[len(NUMBERS) + int(rng.random() * len(WORDS))]
