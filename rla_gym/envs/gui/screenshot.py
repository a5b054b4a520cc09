"""The ``rgb_array`` screenshot of RLA-GUI-v0, drawn with numpy (no fonts).

Words are coloured bars (the colour names the word, the width its length); checkboxes
show a green mark when on, the focused row a yellow ring.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rla_gym.envs.gui.dynamics import GUIDynamics
from rla_gym.envs.gui.layout import KIND_CHECK, NODE_OPENER, NODE_SUB, ON, ROWS, TOKEN_ID, VOCAB

# Words are drawn as coloured bars (no fonts): the colour names the word, the width its length.
_COLORS = np.random.default_rng(7).integers(40, 230, (len(VOCAB), 3)).astype(np.uint8)
_WIDTH = [min(2 + 3 * len(w), 34) for w in VOCAB]
_DESKTOP = np.empty((160, 240, 3), dtype=np.uint8)
_DESKTOP[:], _DESKTOP[:12] = (40, 44, 52), (75, 78, 88)
_YELLOW, _GREEN, _WHITE = (
    np.array(c, dtype=np.uint8) for c in ((250, 210, 40), (30, 140, 60), (250, 250, 250))
)


def _bar(image: np.ndarray, y: int, x: int, token: int) -> None:
    image[y : y + 5, x : x + _WIDTH[token]] = _COLORS[token]


class GUIScreenshot(GUIDynamics):
    """Mixin of :class:`~rla_gym.envs.gui.env.GUIEnv`: the ``rgb_array`` screenshot."""

    _frame_cache: dict[Any, np.ndarray]  # the static parts of each screen seen this episode

    def _rgb_array(self) -> np.ndarray:
        """``"rgb_array"``: a 160 x 240 screenshot of what is visible now (static parts cached per screen)."""
        dialog, path, page, offsets, focus, _, _ = self._core
        key = path if dialog < 0 else (dialog, page, offsets[page])
        base = self._frame_cache.get(key)
        if base is None:  # everything but the values and the focus is cached per screen
            base = self._draw_menus(path) if dialog < 0 else self._draw_dialog(dialog, page, offsets[page])
            self._frame_cache[key] = base
        image = base.copy()
        if dialog < 0:
            return image
        for r, c in enumerate(self._d_pages[dialog][page][offsets[page] : offsets[page] + ROWS]):
            y = 41 + 19 * r
            if c == focus:
                image[y - 1 : y + 18, 9:221:211] = _YELLOW
                image[y - 1 : y + 18 : 18, 9:221] = _YELLOW
            if self._c_kind[c] == KIND_CHECK:
                image[y + 6 : y + 11, 16:21] = _GREEN if self._pending[c] == ON else _WHITE
            else:
                _bar(image, y + 6, 144, self._pending[c])
        return image

    def _draw_menus(self, path: tuple[int, ...]) -> np.ndarray:
        image = self._draw_background(path)
        for level, node in enumerate(path):
            x = 2 + 79 * level
            children = self._n_children[node]
            image[13 : 15 + 13 * len(children), x : x + 76] = (20, 20, 24)
            for i, child in enumerate(children):
                y = 14 + 13 * i
                is_open = level + 1 < len(path) and path[level + 1] == child
                image[y : y + 12, x + 1 : x + 75] = (80, 120, 200) if is_open else (120, 123, 133)
                _bar(image, y + 4, x + 4, self._n_label[child])
                kind = self._n_kind[child]
                if kind == NODE_SUB:  # an arrow block: opens a submenu
                    image[y + 3 : y + 9, x + 68 : x + 72] = _WHITE
                elif kind == NODE_OPENER:  # an ellipsis: opens a dialog
                    image[y + 8 : y + 10, x + 60 : x + 72 : 4] = _WHITE
        return image

    def _draw_background(self, path: tuple[int, ...] | None) -> np.ndarray:
        """Desktop and menu bar; ``path`` None draws the bar disabled (a dialog is open)."""
        image = _DESKTOP.copy()
        for i, node in enumerate(self._top):
            x = 2 + 39 * i
            opened = path is not None and path[:1] == (node,)
            image[1:11, x : x + 37] = (
                (80, 120, 200) if opened else (60, 62, 70) if path is None else (105, 108, 118)
            )
            _bar(image, 4, x + 3, self._n_label[node])
        return image

    def _draw_dialog(self, dialog: int, page: int, offset: int) -> np.ndarray:
        image = self._draw_background(None)
        image[14:158, 6:234] = (205, 207, 212)
        image[14:25, 6:234] = (50, 80, 150)
        _bar(image, 17, 10, self._d_label[dialog])
        for p, label in enumerate(self._d_tabs[dialog]):
            x = 10 + 54 * p
            image[27:38, x : x + 50] = (245, 245, 245) if p == page else (160, 163, 170)
            _bar(image, 30, x + 3, label)
        controls = self._d_pages[dialog][page]
        for r, c in enumerate(controls[offset : offset + ROWS]):
            y = 41 + 19 * r
            image[y : y + 17, 10:220] = (225, 227, 232)
            a, b = self._c_label[c]
            if self._c_kind[c] == KIND_CHECK:
                image[y + 3 : y + 14, 13:24] = (30, 30, 30)
                image[y + 4 : y + 13, 14:23] = _WHITE
            else:
                image[y + 2 : y + 15, 140:215] = _WHITE
            _bar(image, y + 6, 30, a)
            _bar(image, y + 6, 30 + 3 + _WIDTH[a], b)
        if len(controls) > ROWS:  # scroll bar with its thumb
            image[41:135, 223:229] = (150, 152, 160)
            top = 41 + (94 * offset) // len(controls)
            image[top : top + (94 * ROWS) // len(controls), 223:229] = (70, 72, 80)
        for x, word in ((120, "close"),) if self._knobs.instant_apply else ((120, "ok"), (176, "cancel")):
            image[140:154, x : x + 50] = (170, 173, 182)
            _bar(image, 145, x + 4, TOKEN_ID[word])
        return image
