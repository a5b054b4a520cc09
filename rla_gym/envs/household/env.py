"""RLA-Household-v0: ALFWorld-like household tasks over a symbolic house."""

from __future__ import annotations

import random
import string
from typing import Any

import numpy as np

from rla_gym.core import RLAEnv, Task
from rla_gym.envs.household.catalog import (
    ACTION_NAMES,
    CLOSE_,
    COLORS,
    DESK,
    EMPTY,
    FAMILY_KINDS,
    FAMILY_PLACE,
    FAMILY_STATUS,
    FRIDGE,
    GO_,
    HELD,
    HOLDING,
    JUNK,
    KINDS,
    LOOK_,
    MAX_OBJECTS,
    MICROWAVE,
    NONE,
    OPEN_,
    OPENABLE,
    PLURALS,
    PUT_,
    REC_TOK,
    RECEPTACLES,
    ROOMS,
    SINK,
    SPECIAL,
    STATUS_TOK,
    STATUS_WORDS,
    TAKE_,
    TOK,
    TOKEN_LENGTH,
    USE_,
    VOCAB,
    HouseholdKnobs,
    household_knobs,
    rec_name,
    rec_place,
)


class HouseholdEnv(RLAEnv):
    """ALFWorld-like household tasks: find objects, process them, put them in place.

    ## Description
    A house of one to three rooms (kitchen, lounge, bedroom) holds receptacles from
    a fixed catalogue (fridge 1, microwave 1, sink 1, desk 1 with a desk lamp,
    countertops, cabinets, drawers, shelves, a sidetable, a table) and coloured
    objects in them. Fridge, microwave, cabinets and drawers may start closed and
    hide their contents until opened. The agent holds at most one object. Task
    families, as in ALFWorld: *put* ("put the red mug in cabinet 2"), *clean*
    (clean it at the sink first), *heat* (microwave), *cool* (fridge), *examine*
    (hold it and use the desk lamp) and *two* ("put two apples in drawer 1").
    Going to a receptacle of another room takes a "go to <room>" first.

    ## Difficulty
    ``difficulty`` d in [0, 1] sets every knob through one monotone table
    (:func:`household_knobs`):

    | knob | formula (round = half up) | d=0 | 0.25 | 0.5 | 0.75 | 1 |
    |---|---|---|---|---|---|---|
    | rooms | min(3, 1 + floor(2.7d)) | 1 | 1 | 2 | 3 | 3 |
    | receptacles | round(2 + 14d^2) | 2 | 3 | 6 | 10 | 16 |
    | objects | round(1 + 11d^2) | 1 | 2 | 4 | 7 | 12 |
    | objects per receptacle at start (max) | 1 + round(2d) | 1 | 2 | 2 | 3 | 3 |
    | closed-container probability | min(1, max(0, 1.6 (d - .375))) | 0 | 0 | .2 | .6 | 1 |
    | task families (uniform mix) | clean from .25, heat and cool from .45, examine from .65, two from .85 | put | put clean | put clean heat cool | put clean heat cool examine | put clean heat cool examine two |
    | goal detail (where the goal objects are) | live below .35, start below .65, none | live | live | start | none | none |
    | step budget | ceil(optimal_len * (8 - 6.4d)) + round(12 (1-d)) | 8x+12 | 6.4x+9 | 4.8x+6 | 3.2x+3 | 1.6x |

    *two* tasks have two sub-goals (both objects of the named kind, and only those two
    exist). With live goal detail the goal says where each goal object is now, so a
    memoryless policy can solve it; "start" names where it was at the start.

    ## Observation
    ``obs_mode="dict"`` (default): ``tokens``, a ``Box(0, V-1, (68,), int64)`` of word
    ids in a fixed layout: goal 5 (family, colour, kind, target receptacle 2), goal
    detail 2 x 2 (receptacle or "holding"), the room of each catalogue receptacle 16
    (``<none>`` if absent), the agent's room, receptacle and its open / closed state 4,
    the visible contents 12 x 3 (colour, kind, status; hidden while closed), the held
    object 3. ``action_mask`` is a ``MultiBinary(39)``. ``"flat"``: both in one float32
    ``Box``. ``"text"``: the same content as English, a ``Text`` space.

    ## Action
    ``Discrete(39)``: go to room (3), go to catalogue receptacle k in the current
    room (16), open / close the receptacle the agent is at, take visible object slot
    1-12 (empty hands, open receptacle), put the held object into the receptacle the
    agent is at, clean / heat / cool the held object at sink / microwave / fridge,
    use the lamp (at desk 1, holding an object), look (the no-op). Inadmissible
    commands are masked and are no-ops if taken anyway.

    ## Reward
    Sparse: 1.0 on the step that completes the goal, 0.0 otherwise. No shaping.

    ## Episode end
    Terminated when the goal holds (object(s) in the target with the required status,
    or the lamp used while holding the object; ``outcome=+1``); truncated when the step
    budget runs out (``outcome=-1``).

    ## Oracle
    Exact and closed form: moves cost 0 / 1 / 2 (same receptacle / same room / other
    room), so an optimal plan is a short list of stops (drop a held non-goal object
    at the best receptacle, take, process, put or use), each costing its move, one
    action and one "open" the first time a closed receptacle is used. The distance is
    the minimum over the few stop orders, memoised per episode; brute-force BFS
    over the full state confirms it in the tests.

    ## Version history
    - v0: initial release.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}  # noqa: RUF012
    env_id = "RLA-Household-v0"
    vocab = VOCAB
    token_length = TOKEN_LENGTH
    action_names = ACTION_NAMES
    noop_action = LOOK_
    text_max_length = 880
    text_charset = string.ascii_letters + string.digits + " .,;:()'-\n"

    # ------------------------------------------------------------ generation
    def _generate(self, task: Task) -> None:
        k = self._knobs = household_knobs(task.difficulty)
        rng = random.Random(task.seed)
        self._family = family = rng.choice(k.families)
        place = FAMILY_PLACE.get(family, -1)
        required = [place] if place >= 0 else []
        others = [r for r in range(len(RECEPTACLES)) if r != place]
        present = sorted(required + rng.sample(others, k.receptacles - len(required)))
        self._present = present
        self._place_rooms(k, present, rng)
        self._place_objects(k, family, present, rng)
        self._open = ~OPENABLE  # non-openable receptacles count as always open
        for r in present:
            if OPENABLE >> r & 1 and rng.random() >= k.closed_prob:
                self._open |= 1 << r
        self._room = rng.randrange(k.rooms)
        self._at = -1
        self._held = -1
        self._examined = False
        self._memo: dict[tuple[int, ...], int] = {}
        self._map_tokens = [TOK[ROOMS[room]] if room >= 0 else NONE for room in self._rec_room]
        self._start_hint = self._hint_tokens()

    def _place_rooms(self, k: HouseholdKnobs, present: list[int], rng: random.Random) -> None:
        """Appliances go to the kitchen, the desk to the last room, the rest anywhere (no room empty)."""
        self._rec_room = [-1] * len(RECEPTACLES)
        free = [r for r in present if r not in (FRIDGE, MICROWAVE, SINK, DESK)]
        rng.shuffle(free)
        for r in present:
            if r in (FRIDGE, MICROWAVE, SINK):
                self._rec_room[r] = 0
            elif r == DESK:
                self._rec_room[r] = k.rooms - 1
        for i, r in enumerate(free):  # the first ones fill each room once, so none is empty
            self._rec_room[r] = i if i < k.rooms else rng.randrange(k.rooms)
        self._room_recs = [[r for r in present if self._rec_room[r] == room] for room in range(k.rooms)]

    def _place_objects(self, k: HouseholdKnobs, family: str, present: list[int], rng: random.Random) -> None:
        names = [(c, n) for c in range(len(COLORS)) for n in range(len(KINDS))]
        kinds = FAMILY_KINDS.get(family, KINDS)
        kind = KINDS.index(rng.choice(kinds))
        colors = rng.sample(range(len(COLORS)), 2)
        goal_names = [(c, kind) for c in colors[: 2 if family == "two" else 1]]
        if family == "two":  # exactly two objects of the goal kind exist
            names = [name for name in names if name[1] != kind]
        names = [name for name in names if name not in goal_names]
        objects = goal_names + rng.sample(names, k.objects - len(goal_names))
        self._names = objects
        self._goal = list(range(len(goal_names)))
        self._status = [0] * len(objects)
        self._required = FAMILY_STATUS.get(family, 0)
        self._target = -1
        if family != "examine":
            self._target = rng.choice([r for r in present if r != FAMILY_PLACE.get(family)])
        self._contents: list[list[int]] = [[] for _ in RECEPTACLES]
        self._where = [0] * len(objects)
        for obj in range(len(objects)):
            spots = [r for r in present if len(self._contents[r]) < k.max_per_receptacle]
            if obj in self._goal:
                spots = [r for r in spots if r != self._target]
            r = rng.choice(spots)
            self._contents[r].append(obj)
            self._where[obj] = r

    # ------------------------------------------------------------ dynamics
    def _apply(self, action: int) -> None:
        if action < GO_:
            self._room, self._at = action, -1
        elif action < OPEN_:
            self._at = action - GO_
        elif action == OPEN_:
            self._open |= 1 << self._at
        elif action == CLOSE_:
            self._open &= ~(1 << self._at)
        elif action < PUT_:
            self._held = self._contents[self._at].pop(action - TAKE_)
            self._where[self._held] = HELD
        elif action == PUT_:
            self._contents[self._at].append(self._held)
            self._where[self._held] = self._at
            self._held = -1
        elif action < USE_:
            self._status[self._held] = action - PUT_  # clean 1, heat 2, cool 3
        elif action == USE_:
            self._examined = self._family == "examine" and self._held == 0

    def _action_mask(self) -> list[int]:
        mask = [0] * len(ACTION_NAMES)
        room, at, held = self._room, self._at, self._held
        for r in range(self._knobs.rooms):
            mask[r] = int(r != room)
        for r in self._room_recs[room]:
            mask[GO_ + r] = int(r != at)
        if at >= 0:
            is_open = self._open >> at & 1
            if OPENABLE >> at & 1:
                mask[CLOSE_ if is_open else OPEN_] = 1
            if is_open and held < 0:
                for j in range(len(self._contents[at])):
                    mask[TAKE_ + j] = 1
            elif is_open:
                mask[PUT_] = 1
            if held >= 0:
                special = SPECIAL.get(at)
                if special is not None:
                    mask[special] = 1
        mask[LOOK_] = 1
        return mask

    def _success(self) -> bool:
        if self._family == "examine":
            return self._examined
        t = self._target
        return all(self._where[o] == t for o in self._goal) and (
            self._required == 0 or self._status[0] == self._required
        )

    # ------------------------------------------------------------ oracle
    def _state(self) -> tuple[int, ...]:
        """The oracle's key: everything the optimal cost depends on (non-goal objects are alike)."""
        held = self._held
        code = EMPTY if held < 0 else held if held < len(self._goal) else JUNK
        second = self._where[1] if len(self._goal) == 2 else EMPTY
        return self._room, self._at, code, self._where[0], second, self._status[0], self._open

    def _walk(self, room: int, at: int, opened: int, stops: list[tuple[int, bool]]) -> int:
        """Cost of visiting ``stops`` in order, one action at each, opening closed ones that need it."""
        cost = len(stops)
        rec_room = self._rec_room
        for r, needs_open in stops:
            if r != at:
                cost += 1 if rec_room[r] == room else 2
                room, at = rec_room[r], r
            if needs_open and not opened >> r & 1:
                cost += 1
                opened |= 1 << r
        return cost

    def _plan_cost(self, state: tuple[int, ...]) -> int:
        """Exact optimal cost: the best of the few stop orders (see the class docstring)."""
        room, at, held, p0, p1, status, opened = state
        t = self._target
        if self._family == "two":
            if held >= 0:  # deliver it first; the other follows if it is not in place
                other = p1 if held == 0 else p0
                tail = [] if other == t else [(other, True), (t, True)]
                return self._walk(room, at, opened, [(t, True), *tail])
            pending = [p for p in (p0, p1) if p != t]
            if not pending:
                return 0
            plans = [[(a, True), (t, True), (b, True), (t, True)] for a, b in ((p0, p1), (p1, p0))]
            if len(pending) == 1:
                plans = [[(pending[0], True), (t, True)]]
        else:
            need = self._required and status != self._required
            if self._family == "examine":
                tail = [(DESK, False)]
            elif p0 == t and not need:
                return 0
            else:
                tail = [(FAMILY_PLACE[self._family], False)] if need else []
                tail.append((t, True))
            if held == 0:
                return self._walk(room, at, opened, tail)
            plans = [[(p0, True), *tail]]
        if held == JUNK:  # hands must be emptied first: put the object at the best receptacle
            return min(self._walk(room, at, opened, [(r, True), *p]) for p in plans for r in self._present)
        return min(self._walk(room, at, opened, p) for p in plans)

    def _cost(self, state: tuple[int, ...]) -> int:
        cost = self._memo.get(state)
        if cost is None:
            cost = self._memo[state] = self._plan_cost(state)
        return cost

    def _distance(self) -> int:
        return self._cost(self._state())

    def _oracle_actions(self) -> list[int]:
        state = self._state()
        target = self._cost(state) - 1
        if target < 0:
            return []
        room, at, held, p0, p1, status, opened = state
        best = []
        for action, admissible in enumerate(self._mask_list):
            if not admissible or action == LOOK_:
                continue
            if action < GO_:
                nxt = (action, -1, held, p0, p1, status, opened)
            elif action < OPEN_:
                nxt = (room, action - GO_, held, p0, p1, status, opened)
            elif action == OPEN_:
                nxt = (room, at, held, p0, p1, status, opened | 1 << at)
            elif action == CLOSE_:
                continue  # closing never shortens a plan
            elif action < PUT_:
                obj = self._contents[at][action - TAKE_]
                if obj >= len(self._goal):
                    nxt = (room, at, JUNK, p0, p1, status, opened)
                elif obj == 0:
                    nxt = (room, at, 0, HELD, p1, status, opened)
                else:
                    nxt = (room, at, 1, p0, HELD, status, opened)
            elif action == PUT_:
                nxt = (
                    room, at, EMPTY,
                    at if held == 0 else p0,
                    at if held == 1 else p1,
                    status, opened,
                )  # fmt: skip
            elif action < USE_:
                if held != 0 or self._family == "two":
                    continue  # processing a non-goal object changes nothing that matters
                nxt = (room, at, held, p0, p1, action - PUT_, opened)
            else:
                if self._family == "examine" and held == 0:
                    best.append(action)  # the lamp finishes the task
                continue
            if self._cost(nxt) == target:
                best.append(action)
        return best

    # ------------------------------------------------------------ rendering
    def _hint_tokens(self) -> list[int]:
        tokens: list[int] = []
        for obj in self._goal:
            where = self._where[obj]
            tokens += [HOLDING, NONE] if where == HELD else REC_TOK[where]
        return tokens + [NONE] * (4 - len(tokens))

    def _goal_tokens(self) -> list[int]:
        color, kind = self._names[0]
        first = NONE if self._family == "two" else TOK[COLORS[color]]
        target = REC_TOK[self._target if self._target >= 0 else DESK]
        detail = self._knobs.goal_detail
        hint = (
            self._hint_tokens() if detail == "live" else self._start_hint if detail == "start" else [NONE] * 4
        )
        return [TOK[self._family], first, TOK[KINDS[kind]], *target, *hint]

    def _object_tokens(self, obj: int) -> list[int]:
        color, kind = self._names[obj]
        return [TOK[COLORS[color]], TOK[KINDS[kind]], STATUS_TOK[self._status[obj]]]

    def _tokens(self) -> list[int]:
        at = self._at
        tokens = self._goal_tokens() + self._map_tokens + [TOK[ROOMS[self._room]]]
        shown: list[int] = []
        if at < 0:
            tokens += [NONE, NONE, NONE]
        else:
            tokens += REC_TOK[at]
            if not OPENABLE >> at & 1:
                tokens.append(NONE)
            elif self._open >> at & 1:
                tokens.append(TOK["open"])
            else:
                tokens.append(TOK["closed"])
            if self._open >> at & 1:
                shown = self._contents[at]
        for obj in shown:
            tokens += self._object_tokens(obj)
        tokens += [NONE] * (3 * (MAX_OBJECTS - len(shown)))
        tokens += self._object_tokens(self._held) if self._held >= 0 else [NONE, NONE, NONE]
        return tokens

    def _object_name(self, obj: int, article: str = "a") -> str:
        color, kind = self._names[obj]
        status = STATUS_WORDS[self._status[obj]]
        return f"{article} {COLORS[color]} {KINDS[kind]}" + (f" ({status})" if status else "")

    def _goal_text(self) -> str:
        color, kind = self._names[0]
        obj, target = f"the {COLORS[color]} {KINDS[kind]}", rec_place(self._target)
        return {
            "put": f"put {obj} {target}",
            "clean": f"clean {obj} and put it {target}",
            "heat": f"heat {obj} and put it {target}",
            "cool": f"cool {obj} and put it {target}",
            "examine": f"examine {obj} under the desk lamp on {rec_name(DESK)}",
            "two": f"put two {PLURALS.get(KINDS[kind], KINDS[kind] + 's')} {target}",
        }[self._family]

    def _hint_text(self, tokens: list[int]) -> str:
        parts = []
        for i, obj in enumerate(self._goal):
            color, kind = self._names[obj]
            where, name = tokens[2 * i], f"the {COLORS[color]} {KINDS[kind]}"
            if where == HOLDING:
                parts.append(f"you are holding {name}")
            elif where != NONE:
                verb = "is" if self._knobs.goal_detail == "live" else "was first"
                parts.append(f"{name} {verb} {rec_place(REC_TOK.index(tokens[2 * i : 2 * i + 2]))}")
        return "; ".join(parts)

    def _text(self) -> str:
        lines = [f"Your task is to: {self._goal_text()}."]
        hint = self._hint_text(self._goal_tokens()[5:])
        if hint:
            lines.append(f"Hint: {hint}.")
        rooms = [
            f"{ROOMS[room]} has " + ", ".join(rec_name(r) for r in recs)
            for room, recs in enumerate(self._room_recs)
        ]
        lines.append("House: " + "; ".join(rooms) + ".")
        at = self._at
        if at < 0:
            lines.append(f"You are in the {ROOMS[self._room]}, in the middle of the room.")
        else:
            is_open = self._open >> at & 1
            state = "" if not OPENABLE >> at & 1 else " (open)" if is_open else " (closed)"
            lines.append(f"You are in the {ROOMS[self._room]}, at {rec_name(at)}{state}.")
            if is_open:
                seen = ", ".join(self._object_name(o) for o in self._contents[at]) or "nothing"
                lines.append(f"You see: {seen}." + (" A desk lamp stands on it." if at == DESK else ""))
            else:
                lines.append("It is closed: you cannot see inside.")
        held = self._object_name(self._held) if self._held >= 0 else "nothing"
        lines.append(f"You are holding: {held}.")
        return "\n".join(lines)

    def _rgb_array(self, tile: int = 16) -> np.ndarray:
        """``"rgb_array"``: rooms as columns of receptacles (agent blue frame, target green)."""
        rows = max(len(recs) for recs in self._room_recs)
        width = MAX_OBJECTS * 4 + 8
        image = np.full((rows * tile + 2 * tile, len(self._room_recs) * width, 3), 30, dtype=np.uint8)
        palette = np.array(
            [(220, 50, 50), (60, 180, 80), (60, 90, 230), (230, 210, 60), (240, 240, 240), (90, 90, 90)]
        )
        for room, recs in enumerate(self._room_recs):
            left = room * width
            if room == self._room:
                image[:tile, left : left + width] = (60, 90, 230)
            for i, r in enumerate(recs):
                top = (i + 1) * tile
                color = (200, 200, 200) if self._open >> r & 1 else (150, 90, 40)
                image[top + 2 : top + tile - 2, left + 2 : left + width - 2] = color
                if r == self._target:
                    image[top + 2 : top + 4, left + 2 : left + width - 2] = (60, 180, 80)
                if r == self._at:
                    image[top : top + 2, left : left + width] = (60, 90, 230)
                for j, obj in enumerate(self._contents[r]):
                    image[top + 5 : top + 11, left + 4 + 4 * j : left + 7 + 4 * j] = palette[
                        self._names[obj][0]
                    ]
        if self._held >= 0:
            image[-tile + 4 : -4, 4:12] = palette[self._names[self._held][0]]
        return image
