"""The exact oracle of RLA-GUI-v0: closed-form distance and the commands that lower it."""

from __future__ import annotations

from typing import Any

from rla_gym.envs.gui.dynamics import WRONG_PENDING, WRONG_SAVED, GUICore, GUIDynamics
from rla_gym.envs.gui.layout import KIND_CHECK, ROWS, WAIT_


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


class GUIOracle(GUIDynamics):
    """Mixin of :class:`~rla_gym.envs.gui.env.GUIEnv`: exact distance, memoised per episode."""

    _mask_list: list[int]  # set by RLAEnv
    _memo: dict[tuple[Any, ...], int]
    _oracle_memo: dict[tuple[Any, ...], list[int]]
    _rest_memo: dict[int, int]

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

    def _cost(self, core: GUICore) -> int:
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

    def _plan(self, core: GUICore) -> int:
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
        key = (self._screen_key(), core[WRONG_PENDING], core[WRONG_SAVED])
        best = self._oracle_memo.get(key)
        if best is None:
            target = self._cost(core) - 1
            best = self._oracle_memo[key] = [
                a
                for a, ok in enumerate(self._mask_list)
                if ok and a != WAIT_ and target >= 0 and self._cost(self._successor(core, a)) == target
            ]
        return best[:]
