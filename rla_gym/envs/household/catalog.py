"""Household catalogue: rooms, receptacles, objects, vocabulary, command layout and the knob table."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from rla_gym.core import check_difficulty, half_up

ROOMS = ("kitchen", "lounge", "bedroom")
#: The receptacle catalogue: slot k is always the same named receptacle ("go to drawer 2").
RECEPTACLES = (
    ("fridge", 1), ("microwave", 1), ("sink", 1), ("desk", 1), ("countertop", 1), ("countertop", 2),
    ("cabinet", 1), ("cabinet", 2), ("cabinet", 3), ("drawer", 1), ("drawer", 2), ("drawer", 3),
    ("shelf", 1), ("shelf", 2), ("sidetable", 1), ("table", 1),
)  # fmt: skip
FRIDGE, MICROWAVE, SINK, DESK = 0, 1, 2, 3  # the appliances, and the desk that holds the lamp
OPENABLE = sum(
    1 << k for k, (kind, _) in enumerate(RECEPTACLES) if kind in ("fridge", "microwave", "cabinet", "drawer")
)
COLORS = ("red", "green", "blue", "yellow", "white", "black")
KINDS = ("apple", "potato", "tomato", "egg", "mug", "cup", "plate", "bowl", "knife", "book", "pen", "vase")
PLURALS = {"potato": "potatoes", "tomato": "tomatoes", "knife": "knives"}
FAMILIES = ("put", "clean", "heat", "cool", "examine", "two")
STATUS_WORDS = ("", "clean", "hot", "cool")  # object status: 0 plain, 1 clean, 2 hot, 3 cool (last wins)
FAMILY_STATUS = {"clean": 1, "heat": 2, "cool": 3}
FAMILY_PLACE = {"clean": SINK, "heat": MICROWAVE, "cool": FRIDGE, "examine": DESK}
FAMILY_KINDS = {
    "clean": ("apple", "potato", "tomato", "mug", "cup", "plate", "bowl", "knife"),
    "heat": ("apple", "potato", "tomato", "egg", "mug", "cup", "plate", "bowl"),
    "cool": ("apple", "potato", "tomato", "egg", "mug", "cup", "plate", "bowl"),
    "examine": ("book", "pen", "vase", "mug", "cup", "bowl"),
}
VOCAB = tuple(
    dict.fromkeys(
        ("<pad>", "<none>", "holding", "open", "closed", "hot", *FAMILIES, *ROOMS)
        + tuple(kind for kind, _ in RECEPTACLES)
        + ("1", "2", "3", *COLORS, *KINDS)
    )
)
TOK = {w: i for i, w in enumerate(VOCAB)}
NONE, HOLDING = TOK["<none>"], TOK["holding"]
STATUS_TOK = (NONE, TOK["clean"], TOK["hot"], TOK["cool"])
REC_TOK = tuple([TOK[kind], TOK[str(n)]] for kind, n in RECEPTACLES)

MAX_OBJECTS = 12  # take slots: every object of the world fits in one receptacle's slots
HELD, JUNK, EMPTY = -1, -2, -3  # object place when held; held-code of a non-goal object; empty hands
GO_ROOM_, GO_, OPEN_, CLOSE_ = 0, len(ROOMS), len(ROOMS) + len(RECEPTACLES), len(ROOMS) + len(RECEPTACLES) + 1
TAKE_ = CLOSE_ + 1
PUT_ = TAKE_ + MAX_OBJECTS
CLEAN_, HEAT_, COOL_, USE_, LOOK_ = PUT_ + 1, PUT_ + 2, PUT_ + 3, PUT_ + 4, PUT_ + 5
ACTION_NAMES = (
    tuple(f"go to {room}" for room in ROOMS)
    + tuple(f"go to {kind} {n}" for kind, n in RECEPTACLES)
    + ("open", "close")
    + tuple(f"take object {j + 1}" for j in range(MAX_OBJECTS))
    + ("put", "clean", "heat", "cool", "use lamp", "look")
)
SPECIAL = {SINK: CLEAN_, MICROWAVE: HEAT_, FRIDGE: COOL_, DESK: USE_}  # commands that need their place
TOKEN_LENGTH = 5 + 4 + len(RECEPTACLES) + 4 + 3 * MAX_OBJECTS + 3


@dataclass(frozen=True)
class HouseholdKnobs:
    """Concrete generation knobs for one difficulty (see :func:`household_knobs`)."""

    rooms: int
    receptacles: int
    objects: int
    max_per_receptacle: int
    closed_prob: float
    families: tuple[str, ...]
    goal_detail: str
    budget_factor: float
    budget_slack: int


def household_knobs(difficulty: float) -> HouseholdKnobs:
    """The documented, monotone map from difficulty to knobs (the table in the docstring)."""
    return _household_knobs(check_difficulty(difficulty))


@functools.lru_cache(maxsize=1024)  # every reset asks; the knobs are frozen
def _household_knobs(d: float) -> HouseholdKnobs:
    thresholds = (0.0, 0.25, 0.45, 0.45, 0.65, 0.85)  # when each family of FAMILIES joins the mix
    return HouseholdKnobs(
        rooms=min(3, 1 + math.floor(2.7 * d)),
        receptacles=half_up(2 + 14 * d * d),
        objects=half_up(1 + 11 * d * d),
        max_per_receptacle=1 + half_up(2 * d),
        closed_prob=round(min(1.0, max(0.0, 1.6 * (d - 0.375))), 6),
        families=tuple(f for f, t in zip(FAMILIES, thresholds, strict=True) if d >= t),
        goal_detail="live" if d < 0.35 else "start" if d < 0.65 else "none",
        budget_factor=round(8.0 - 6.4 * d, 6),
        budget_slack=half_up(12 * (1 - d)),
    )


def rec_name(r: int) -> str:
    """'cabinet 2'."""
    kind, n = RECEPTACLES[r]
    return f"{kind} {n}"


def rec_place(r: int) -> str:
    """'in cabinet 2' or 'on table 1'."""
    on = RECEPTACLES[r][0] in ("countertop", "shelf", "desk", "sidetable", "table")
    return ("on " if on else "in ") + rec_name(r)
