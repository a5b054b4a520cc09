"""The difficulty knobs of RLA-GUI: one monotone table per version (the one in its env's docstring)."""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass

from rla_gym.core import check_difficulty, half_up


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


#: The versions of RLA-GUI: the ids ``RLA-GUI-v0`` and ``RLA-GUI-v1``.
GUI_VERSIONS = (0, 1)


def gui_knobs(difficulty: float, version: int = 0) -> GUIKnobs:
    """The documented, monotone map from difficulty to the knobs of ``RLA-GUI-v{version}`` (the
    table in that env's docstring). The default is v0's table, as it was before v1; v1 differs in
    one knob: its dialogs apply changes at once only below d = 0.1 (v0: 0.2)."""
    if type(version) is not int:  # ints pass with this one check; numpy ints are taken too
        if isinstance(version, bool) or not isinstance(version, numbers.Integral):
            raise TypeError(f"version must be an int, got {version!r}")
        version = int(version)
    if version not in GUI_VERSIONS:
        raise ValueError(f"version must be one of {GUI_VERSIONS}, got {version!r}")
    return _gui_knobs(check_difficulty(difficulty), version)


@functools.lru_cache(maxsize=1024)  # every reset asks; the knobs are frozen
def _gui_knobs(d: float, version: int) -> GUIKnobs:
    return GUIKnobs(
        top_menus=1 + half_up(5 * d),
        items_per_menu=2 + half_up(4 * d),
        menu_depth=1 if d < 0.3 else 2 if d < 0.7 else 3,
        start_open="dialog" if d < 0.2 else "menus" if d < 0.4 else "nothing",
        # v0 asks for OK and for the opener's click from the same level (0.2) and leaves
        # [0.1, 0.2) one click, as at d = 0; v1 asks for OK from 0.1 (docs/benchmarks.md)
        instant_apply=d < (0.2 if version == 0 else 0.1),
        dialogs=1 + half_up(3 * d),
        tabs=1 + half_up(3 * d),
        controls=2 + half_up(8 * d),
        goals=1 if d < 0.3 else 2 if d < 0.7 else 3,
        goal_dialogs=1 if d < 0.6 else 2,
        field_share=round(0.6 * d, 2),
        ambiguity=0 if d < 0.45 else 1 if d < 0.65 else 2 if d < 0.85 else 3,
        budget_factor=4.0 - 2.5 * d,
        budget_slack=half_up(8 * (1 - d)),
    )
