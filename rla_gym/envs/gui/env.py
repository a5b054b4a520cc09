"""RLA-GUI-v0: OSWorld / MiniWoB-like settings tasks in a synthetic application, no browser.

``GUIEnv`` joins the per-concern mixins of this package: ``app`` (generation),
``dynamics`` (abstract state and action mask), ``oracle`` (exact distance) and
``observation`` (tokens and text) and ``screenshot`` (``rgb_array`` frames); ``knobs``
maps difficulty to generation knobs.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from rla_gym.core import RLAEnv, Task
from rla_gym.envs.gui.dynamics import main_window
from rla_gym.envs.gui.knobs import gui_knobs
from rla_gym.envs.gui.layout import (
    ACTION_NAMES,
    BUTTON,
    NONE,
    TOKEN_ID,
    TOKEN_LENGTH,
    VOCAB,
    WAIT_,
)
from rla_gym.envs.gui.observation import GUIObservation
from rla_gym.envs.gui.oracle import GUIOracle
from rla_gym.envs.gui.screenshot import GUIScreenshot

# the two button rows of a dialog (read-only, shared by every world)
_CLOSE_BUTTONS = [BUTTON, TOKEN_ID["close"], NONE, NONE, NONE, 0, 0, 0, 0, 0]
_OK_CANCEL_BUTTONS = [BUTTON, TOKEN_ID["ok"], NONE, NONE, NONE, BUTTON, TOKEN_ID["cancel"], NONE, NONE, NONE]
try:  # CPython: ``random.Random.seed`` of an int seed is this C seeding (after its type checks)
    from _random import Random as _CRandom

    _c_seed: Any = _CRandom.seed
except ImportError:  # pragma: no cover  (other interpreters)
    _c_seed = random.Random.seed


def _reseed(rng: random.Random, seed: int) -> None:
    """What ``random.Random(seed)`` draws, from ``rng`` reseeded (cheaper than building one)."""
    _c_seed(rng, seed)
    rng.gauss_next = None  # type: ignore[attr-defined]  # as random.Random.seed resets it


class GUIEnv(GUIObservation, GUIOracle, GUIScreenshot, RLAEnv):
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
    tested against brute-force BFS. ``info["oracle_mask"]`` marks every command
    that lowers it by one.

    ## Version history
    - v1: dialogs apply changes at once only below d = 0.1 (v0: below 0.2), so a learner meets
      OK from 0.1 and the opener's click from 0.2 instead of both at 0.2, and [0.1, 0.2) is no
      longer one click as at d = 0 (random success 0.10-0.11 there, against v0's 0.53-0.54).
      Tasks at other difficulties are v0's worlds. In the closed loop (MaskablePPO, 100k steps, 3 seeds)
      held-out success at d = 0.25 is 0.23-0.30 on v1 against 0.08-0.09 on v0 (the benchmarks
      page, "How difficulty bites", has the runs).
    - v0: initial release (the study on the results page ran on it). Making it shows
      Gymnasium's "out of date" warning; ``warnings.filterwarnings("ignore", message=".*RLA-GUI-v0
      is out of date")``, after importing gymnasium, silences it.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}  # noqa: RUF012
    env_id = "RLA-GUI-v0"
    version: ClassVar[int] = 0  # the knob table's version (:func:`gui_knobs`)
    vocab = VOCAB
    token_length = TOKEN_LENGTH
    action_names = ACTION_NAMES
    noop_action = WAIT_
    text_max_length = 2000
    text_charset = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:()'-[]>=\n"
    _rng: random.Random | None = None  # the generator of the worlds, reseeded per task

    # ------------------------------------------------------------ generation
    def _generate(self, task: Task) -> None:
        k = gui_knobs(task.difficulty, self.version)
        self._knobs = k
        rng = self._rng
        if rng is None:
            rng = self._rng = random.Random()
        _reseed(rng, task.seed)  # a task seed is an int (Task checks it)
        self._build_menus(k, rng)
        self._build_dialogs(k, rng)
        self._place_goals(k, rng)
        self._committed = self._initial[:]
        self._pending = []
        cw = (1 << len(self._g_control)) - 1
        start = k.start_open
        if start == "dialog":
            self._pending = self._committed if k.instant_apply else self._committed[:]
            self._core = (0, (), 0, self._zeros[0], -1, cw, cw)  # the goal dialog
        elif start == "menus":  # the goal dialog's menus are open: its item is in sight
            self._core = main_window(self._d_path[0], cw)
        else:
            self._core = main_window((), cw)
        self._memo = {}
        self._mask_memo = {}
        self._oracle_memo = {}
        self._rest_memo = {}
        self._token_cache = {}
        self._frame_cache = {}
        self._instruction = self._make_instruction()
        self._buttons = _CLOSE_BUTTONS if k.instant_apply else _OK_CANCEL_BUTTONS


def _v1_doc(doc: str | None) -> str | None:
    """``GUIEnv``'s docstring with v1's row of the knob table (unchanged where that row or the
    summary is missing: ``python -OO`` strips docstrings; the knob-table test checks the row)."""
    row = "| dialogs apply changes at once (no OK) | d < 0.2 |"
    summary = "Settings tasks in a synthetic desktop application (OSWorld / MiniWoB-like, no browser)."
    if not doc or doc.count(row) != 1 or not doc.startswith(summary):
        return doc
    return doc.replace(row, row.replace("0.2", "0.1")).replace(
        summary, summary[:-1] + "; v1, the recommended version.", 1
    )


class GUIEnvV1(GUIEnv):
    __doc__ = _v1_doc(GUIEnv.__doc__)
    env_id = "RLA-GUI-v1"
    version = 1
