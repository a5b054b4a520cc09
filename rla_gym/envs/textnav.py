"""RLA-TextNav-v0: text navigation in a procedurally generated house."""

from __future__ import annotations

import functools
import math
import random
import string
from dataclasses import dataclass
from typing import Any

import numpy as np

from rla_gym.core import RLAEnv, Task, check_difficulty, half_up

COLORS = ("red", "green", "blue", "yellow", "purple", "white", "black", "orange", "grey", "brown")
ROOM_NOUNS = (
    "kitchen", "hallway", "attic", "cellar", "garden", "library", "study", "bedroom",
    "bathroom", "pantry", "nursery", "office", "gallery", "foyer", "den", "porch",
)  # fmt: skip
ITEM_NOUNS = ("key", "coin", "book", "cup", "apple", "ball", "box", "candle")
DIRECTIONS = ("north", "east", "south", "west")
_ROW = 256  # cells are ints (_cell): x * _ROW + y; a house spans fewer than _ROW // 2 cells
_CELL_STEP = (-1, _ROW, 1, -_ROW)  # (0, -1), (1, 0), (0, 1), (-1, 0) per direction
VOCAB = (
    ("<pad>", "<none>", "<unknown>", "go", "bring")
    + DIRECTIONS
    + ("wall", "open", "closed", "locked")
    + COLORS
    + ROOM_NOUNS
    + ITEM_NOUNS
)
_TOK = {w: i for i, w in enumerate(VOCAB)}
#: Room names by index: colour index * len(ROOM_NOUNS) + noun index.
_NAME_IDS = tuple(range(len(COLORS) * len(ROOM_NOUNS)))
_NAME_WORDS = tuple((c, r) for c in COLORS for r in ROOM_NOUNS)
NAME_TOKENS = tuple((_TOK[c], _TOK[r]) for c, r in _NAME_WORDS)
_COLOR_TOK = tuple(_TOK[c] for c in COLORS)
_ITEM_TOK = tuple(_TOK[i] for i in ITEM_NOUNS)
_DIRECTION_TOK = tuple(_TOK[d] for d in DIRECTIONS)
_HINT_SHARE = {"live": 0.0, "route": 1.0, "half route": 0.5, "none": 0.0}  # static directions
NONE, UNKNOWN = _TOK["<none>"], _TOK["<unknown>"]
WALL, OPEN, CLOSED, LOCKED = _TOK["wall"], _TOK["open"], _TOK["closed"], _TOK["locked"]

ROOM_SLOTS = 8  # take slots; the world never holds more items than this
INVENTORY_SLOTS = 3
HINT_STEPS = 8  # direction steps the goal segment can hold
HELD, UNUSED = -1, -2  # item locations besides a room index
GO_, OPEN_, UNLOCK_, TAKE_, DROP_ = 0, 4, 8, 12, 12 + ROOM_SLOTS
LOOK_ = DROP_ + INVENTORY_SLOTS
ACTION_NAMES = (
    tuple(f"go {d}" for d in DIRECTIONS)
    + tuple(f"open {d}" for d in DIRECTIONS)
    + tuple(f"unlock {d}" for d in DIRECTIONS)
    + tuple(f"take item {k + 1}" for k in range(ROOM_SLOTS))
    + tuple(f"drop item {k + 1}" for k in range(INVENTORY_SLOTS))
    + ("look",)
)


@dataclass(frozen=True)
class TextNavKnobs:
    """Concrete generation knobs for one difficulty (see :func:`textnav_knobs`)."""

    rooms: int
    route_min: int
    route_max: int
    distractors: int
    closed_door_prob: float
    locked_door: bool
    bring_prob: float
    directions: str
    name_exits: bool
    budget_factor: float
    budget_slack: int


def textnav_knobs(difficulty: float) -> TextNavKnobs:
    """The documented, monotone map from difficulty to knobs (the table in the docstring)."""
    return _textnav_knobs(check_difficulty(difficulty))


@functools.lru_cache(maxsize=1024)  # every reset asks; the knobs are frozen
def _textnav_knobs(d: float) -> TextNavKnobs:
    return TextNavKnobs(
        rooms=half_up(4 * 16**d),
        route_min=1 + half_up(5 * d),
        route_max=2 + half_up(10 * d),
        distractors=half_up(6 * d),
        closed_door_prob=0.0 if d < 0.4 else 0.15 + 0.35 * (d - 0.4) / 0.6,
        locked_door=d >= 0.7,
        bring_prob=0.0 if d < 0.2 else 0.25 + 0.35 * (d - 0.2) / 0.8,
        directions="live" if d < 0.2 else "route" if d < 0.35 else "half route" if d < 0.5 else "none",
        name_exits=d < 0.5,
        budget_factor=4.0 - 2.5 * d,
        budget_slack=half_up(8 * (1 - d)),
    )


class TextNavEnv(RLAEnv):
    """Text navigation in a procedurally generated house.

    ## Description
    The house is a tree of rooms laid out on a grid. The agent reads where it is,
    the exits and the objects it sees, and must either go to a named room
    ("Go to the red attic") or carry an object there ("Bring the blue coin to the
    red attic": take it, walk there, drop it). Doors may be closed (open them) or
    locked (fetch the key of the door's colour first).

    ## Difficulty
    ``difficulty`` d in [0, 1] sets every knob through one monotone table
    (:func:`textnav_knobs`):

    | knob | formula (round = half up) | d=0 | 0.25 | 0.5 | 0.75 | 1 |
    |---|---|---|---|---|---|---|
    | rooms | round(4 * 16^d) | 4 | 8 | 16 | 32 | 64 |
    | route length band (moves start to goal room) | [1 + round(5d), 2 + round(10d)] | 1-2 | 2-5 | 4-7 | 5-10 | 6-12 |
    | dead-end rooms | rooms - route - 1 | 1-2 | 2-5 | 8-11 | 21-26 | 51-57 |
    | distractor objects | round(6d) | 0 | 2 | 3 | 5 | 6 |
    | closed-door probability per door | 0 below 0.4, then 0.15 + 0.35 (d-0.4)/0.6 | 0 | 0 | .21 | .35 | .5 |
    | locked door on the route (key to fetch) | d >= 0.7 | no | no | no | yes | yes |
    | share of "bring" tasks | 0 below 0.2, then 0.25 + 0.35 (d-0.2)/0.8 | 0 | .27 | .38 | .49 | .6 |
    | goal detail (directions) | live below .2, route below .35, half route below .5, none | live | route | none | none | none |
    | exit descriptions name the destination | d < 0.5 | yes | yes | no | no | no |
    | step budget | ceil(optimal_len * (4 - 2.5d)) + round(8 (1-d)) | 4x+8 | 3.4x+6 | 2.8x+4 | 2.1x+2 | 1.5x |

    ## Observation
    ``obs_mode="dict"`` (default): ``tokens``, a ``Box(0, V-1, (69,), int64)`` of word
    ids in a fixed layout (goal 5, directions 8 x 3, room 2, exits 4 x 4, room
    items 8 x 2, inventory 3 x 2), and ``action_mask``, a ``MultiBinary(24)``.
    ``"flat"``: both concatenated in one float32 ``Box``. ``"text"``: the same
    content as English, a ``Text`` space.

    ## Action
    ``Discrete(24)``: go / open / unlock in four directions, take room item slot
    1-8, drop inventory slot 1-3, look. Inadmissible commands are masked
    (``action_masks()``); taking one anyway is a no-op flagged in
    ``info["invalid_action"]``.

    ## Reward
    Sparse: 1.0 on the step that completes the goal, 0.0 otherwise. No shaping.

    ## Episode end
    Terminated when the goal is reached (``is_success=True``, ``outcome=+1``);
    truncated when the step budget runs out (``outcome=-1``).

    ## Oracle
    Exact: the house is a tree, so the optimal cost of any state follows from
    edge bitmasks (moves, doors still closed on the route, the key detour and
    inventory drops) in O(1) per state, memoised per episode.
    ``info["oracle_mask"]`` marks every command that lowers the optimal
    distance by one, ``info["progress"]`` is +1 / 0 / -1 by that distance, and
    ``info["optimal_len"]`` is the optimal solution length from the episode's start.

    ## Version history
    - v0: initial release.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}  # noqa: RUF012
    env_id = "RLA-TextNav-v0"
    vocab = VOCAB
    token_length = 5 + 3 * HINT_STEPS + 2 + 4 * 4 + 2 * ROOM_SLOTS + 2 * INVENTORY_SLOTS
    action_names = ACTION_NAMES
    noop_action = LOOK_
    text_max_length = 1200
    text_charset = string.ascii_letters + string.digits + " .,;:()'-\n"

    # ------------------------------------------------------------ generation
    def _generate(self, task: Task) -> None:
        k = textnav_knobs(task.difficulty)
        self._knobs = k
        rand = random.Random(task.seed).random
        n = k.rooms
        route_max = min(k.route_max, n - 1)
        route = k.route_min + int(rand() * (route_max - k.route_min + 1))
        self._build_rooms(*_grow_tree(n, route, rand), rand)
        self._goal_room = route
        self._start_room = 0
        self._place_doors(k, route, rand)
        self._place_items(k, rand)
        self._room = 0
        self._inventory: list[int] = []
        self._memo: dict[tuple[int, ...], int] = {}
        self._describe: dict[int, list[int]] = {}
        self._goal_tokens = self._make_goal_tokens()
        self._live_hints: dict[int, tuple[list[tuple[int, int]], list[int]]] = {}

    def _build_rooms(self, cells: list[int], parents: list[int], parent_dir: list[int], rand: Any) -> None:
        n = len(cells)
        self._cells = cells
        self._parent = parents
        self._parent_dir = parent_dir  # the direction of the parent from the room
        self._neighbors = neighbors = [[-1, -1, -1, -1] for _ in range(n)]
        self._up = up = [0] * n  # bitmask of the edges from the room to the start room
        for child in range(1, n):
            p, direction = parents[child], parent_dir[child]
            neighbors[child][direction] = p
            neighbors[p][direction ^ 2] = child  # the opposite direction
            up[child] = up[p] | 1 << (child - 1)
        names = list(_NAME_IDS)
        for i in range(n):  # partial Fisher-Yates: n distinct (colour, noun) names
            j = i + int(rand() * (len(names) - i))
            names[i], names[j] = names[j], names[i]
        del names[n:]
        #: name of each room as an index into _NAME_WORDS (the batched env reads these)
        self._name_ids = names
        self._names = [_NAME_WORDS[c] for c in names]

    def _place_doors(self, k: TextNavKnobs, route: int, rand: Any) -> None:
        n = len(self._cells)
        # door state of the edge between room c and its parent is stored at index c - 1
        self._door = door = [OPEN] * (n - 1)
        closed, p = 0, k.closed_door_prob
        for e in range(n - 1):  # a draw per door, even where none can be closed
            if rand() < p:
                door[e] = CLOSED
                closed |= 1 << e
        self._closed = closed
        self._locked = 0
        self._lock_color = NONE
        if k.locked_door:
            child = 1 + int(rand() * route)  # a door on the route: between route rooms child-1, child
            self._door[child - 1] = LOCKED
            self._closed &= ~(1 << (child - 1))
            self._locked = 1 << (child - 1)
            self._lock_color = _COLOR_TOK[int(rand() * len(COLORS))]

    def _place_items(self, k: TextNavKnobs, rand: Any) -> None:
        n = len(self._cells)
        items: list[tuple[int, int]] = []
        where: list[int] = []
        self._goal_item = self._key = -1
        if rand() < k.bring_prob:
            noun = ITEM_NOUNS[1 + int(rand() * (len(ITEM_NOUNS) - 1))]
            items.append((_COLOR_TOK[int(rand() * len(COLORS))], _TOK[noun]))
            room = int(rand() * (n - 1))
            where.append(room if room < self._goal_room else room + 1)  # any room but the goal
            self._goal_item = 0
        if self._locked:
            reachable = [r for r in range(n) if not self._up[r] & self._locked]
            self._key = len(items)
            items.append((self._lock_color, _TOK["key"]))
            where.append(reachable[int(rand() * len(reachable))])
        wanted = len(items) + k.distractors
        while len(items) < wanted:
            item = (_COLOR_TOK[int(rand() * len(COLORS))], _ITEM_TOK[int(rand() * len(ITEM_NOUNS))])
            if item not in items:
                items.append(item)
                where.append(int(rand() * n))
        self._items = items
        self._room_items: list[list[int]] = [[] for _ in range(n)]
        for i, room in enumerate(where):
            slots = self._room_items[room]
            slots.insert(int(rand() * (len(slots) + 1)), i)  # random slot order
        self._item_rooms = where
        self._key_loc = where[self._key] if self._key >= 0 else UNUSED
        self._item_loc = where[self._goal_item] if self._goal_item >= 0 else UNUSED

    def _make_goal_tokens(self) -> list[int]:
        name = NAME_TOKENS[self._name_ids[self._goal_room]]
        if self._goal_item >= 0:
            goal = [_TOK["bring"], *self._items[self._goal_item], *name]
        else:
            goal = [_TOK["go"], NONE, NONE, *name]
        fraction = _HINT_SHARE[self._knobs.directions]
        self._static_hint = self._hint_steps(fraction) if fraction else []
        return goal + self._hint_tokens(self._static_hint)

    def _hint_tokens(self, steps: list[tuple[int, int]]) -> list[int]:
        tokens: list[int] = []
        names = self._name_ids
        for room, direction in steps:
            tokens += NAME_TOKENS[names[room]]
            tokens.append(_DIRECTION_TOK[direction])
        return tokens + [NONE] * (3 * HINT_STEPS - len(tokens))

    def _hint(self) -> tuple[list[tuple[int, int]], list[int]]:
        """Direction steps and their tokens: live ones follow the agent, the others are fixed."""
        if self._knobs.directions != "live":
            return self._static_hint, self._goal_tokens[5:]
        hint = self._live_hints.get(self._room)
        if hint is None:  # live directions are only used where the state is the room alone
            steps = self._hint_steps(1.0)
            hint = self._live_hints[self._room] = (steps, self._hint_tokens(steps))
        return hint

    def _hint_steps(self, fraction: float) -> list[tuple[int, int]]:
        """(room, direction) of the first moves of an optimal plan from the current state."""
        moves: list[tuple[int, int]] = []
        here = self._room
        up, parent, parent_dir = self._up, self._parent, self._parent_dir
        for target in self._waypoints():
            # on the tree: up while the room is not an ancestor of the target (its edges to the
            # start room are not all the target's), then down the target's branch
            up_target = up[target]
            while up[here] & ~up_target:
                moves.append((here, parent_dir[here]))
                here = parent[here]
            down = []
            room = target
            while room != here:
                down.append((parent[room], parent_dir[room] ^ 2))
                room = parent[room]
            moves += reversed(down)
            here = target
        keep = math.ceil(fraction * len(moves))
        return moves[: min(keep, HINT_STEPS)]

    def _waypoints(self) -> list[int]:
        """The rooms an optimal plan from the current state visits, in order (:meth:`_plan`'s,
        which with no locked door has a single plan: fetch the item if it lies in a room, then
        the goal room)."""
        if self._locked:
            return self._plan(*self._state())[1]
        if self._goal_item < 0:
            return [self._goal_room]
        item_loc = self._item_loc
        if item_loc == self._goal_room:
            return []
        return [self._goal_room] if item_loc == HELD else [item_loc, self._goal_room]

    # ------------------------------------------------------------ dynamics
    def _edge(self, room: int, direction: int) -> int:
        other = self._neighbors[room][direction]
        return (other if self._parent[other] == room else room) - 1

    def _apply(self, action: int) -> None:
        if action < OPEN_:
            self._room = self._neighbors[self._room][action]
        elif action < TAKE_:  # open or unlock: both leave the door open
            edge = self._edge(self._room, action % 4)
            self._door[edge] = OPEN
            self._closed &= ~(1 << edge)
            self._locked &= ~(1 << edge)
            self._describe.pop(edge + 1, None)
            self._describe.pop(self._parent[edge + 1], None)
        elif action < DROP_:
            item = self._room_items[self._room].pop(action - TAKE_)
            self._inventory.append(item)
            self._relocate(item, HELD)
        elif action < LOOK_:
            item = self._inventory.pop(action - DROP_)
            self._room_items[self._room].append(item)
            self._relocate(item, self._room)

    def _relocate(self, item: int, where: int) -> None:
        if item == self._key:
            self._key_loc = where
        elif item == self._goal_item:
            self._item_loc = where

    def _action_mask(self) -> list[int]:
        mask = [0] * len(ACTION_NAMES)
        room = self._room
        holds_key = self._key_loc == HELD
        for direction, other in enumerate(self._neighbors[room]):
            if other >= 0:
                state = self._door[(other if self._parent[other] == room else room) - 1]
                if state == OPEN:
                    mask[direction] = 1
                elif state == CLOSED:
                    mask[OPEN_ + direction] = 1
                elif holds_key:
                    mask[UNLOCK_ + direction] = 1
        if len(self._inventory) < INVENTORY_SLOTS:
            for k in range(len(self._room_items[room])):
                mask[TAKE_ + k] = 1
        for k in range(len(self._inventory)):
            mask[DROP_ + k] = 1
        mask[LOOK_] = 1
        return mask

    def _success(self) -> bool:
        if self._goal_item >= 0:
            return self._item_loc == self._goal_room
        return self._room == self._goal_room

    # ------------------------------------------------------------ oracle
    def _state(self) -> tuple[int, int, int, int, int, int]:
        return self._room, self._key_loc, self._item_loc, self._closed, self._locked, len(self._inventory)

    def _plan(
        self, room: int, key_loc: int, item_loc: int, closed: int, locked: int, held: int
    ) -> tuple[int, list[int]]:
        """Optimal cost and waypoints from a state (exact on a tree; see class docstring)."""
        goal, up = self._goal_room, self._up
        bring = self._goal_item >= 0
        if bring and item_loc == goal:
            return 0, []
        base = [item_loc, goal] if bring and item_loc != HELD else [goal]
        plans = [(base, -1)]
        if locked and key_loc != HELD:
            plans += [(base[:i] + [key_loc] + base[i:], i) for i in range(len(base))]
        best: tuple[int, list[int]] = (1 << 30, base)
        for waypoints, key_at in plans:
            have_key = key_loc == HELD or not locked
            here, union, moves = room, 0, 0
            for i, target in enumerate(waypoints):
                leg = up[here] ^ up[target]
                if leg & locked and not have_key:
                    break
                union |= leg
                moves += leg.bit_count()
                have_key = have_key or i == key_at
                here = target
            else:
                takes = (len(base) == 2) + (key_at >= 0)
                cost = (
                    moves
                    + (union & closed).bit_count()
                    + (1 if union & locked else 0)
                    + takes
                    + max(0, takes - (INVENTORY_SLOTS - held))
                    + bring
                )
                if cost < best[0]:
                    best = (cost, waypoints)
        return best

    def _cost(self, state: tuple[int, int, int, int, int, int]) -> int:
        room, key_loc, item_loc, closed, locked, held = state
        if not locked:
            key_loc = UNUSED
        key = (room, key_loc, item_loc, closed, locked, held)
        cost = self._memo.get(key)
        if cost is None:
            cost = self._memo[key] = self._plan(*key)[0]
        return cost

    def _distance(self) -> int:
        return self._cost(self._state())

    def _oracle_actions(self) -> list[int]:
        state = self._state()
        room, key_loc, item_loc, closed, locked, held = state
        target = self._cost(state) - 1
        if target < 0:
            return []
        best = []
        for action, admissible in enumerate(self._mask_list):
            if not admissible:
                continue
            if action < OPEN_:
                nxt = (self._neighbors[room][action], key_loc, item_loc, closed, locked, held)
            elif action < UNLOCK_:
                nxt = (
                    room,
                    key_loc,
                    item_loc,
                    closed & ~(1 << self._edge(room, action - OPEN_)),
                    locked,
                    held,
                )
            elif action < TAKE_:
                nxt = (room, key_loc, item_loc, closed, 0, held)
            elif action < DROP_:
                item = self._room_items[room][action - TAKE_]
                nxt = (
                    room,
                    HELD if item == self._key else key_loc,
                    HELD if item == self._goal_item else item_loc,
                    closed, locked, held + 1,
                )  # fmt: skip
            elif action < LOOK_:
                item = self._inventory[action - DROP_]
                nxt = (
                    room,
                    room if item == self._key else key_loc,
                    room if item == self._goal_item else item_loc,
                    closed, locked, held - 1,
                )  # fmt: skip
            else:
                continue
            if self._cost(nxt) == target:
                best.append(action)
        return best

    # ------------------------------------------------------------ rendering
    def _tokens(self) -> list[int]:
        room = self._room
        describe = self._describe.get(room)
        if describe is None:
            describe = self._describe[room] = self._room_tokens(room)
        items = self._items
        tokens = self._goal_tokens[:5] + self._hint()[1] + describe
        for i in self._room_items[room]:
            tokens += items[i]
        tokens += [NONE] * (2 * (ROOM_SLOTS - len(self._room_items[room])))
        for i in self._inventory:
            tokens += items[i]
        tokens += [NONE] * (2 * (INVENTORY_SLOTS - len(self._inventory)))
        return tokens

    def _room_tokens(self, room: int) -> list[int]:
        adj, noun = self._names[room]
        tokens = [_TOK[adj], _TOK[noun]]
        for direction, other in enumerate(self._neighbors[room]):
            if other < 0:
                tokens += [WALL, NONE, NONE, NONE]
                continue
            state = self._door[self._edge(room, direction)]
            color = self._lock_color if state == LOCKED else NONE
            if self._knobs.name_exits:
                a, b = self._names[other]
                tokens += [state, color, _TOK[a], _TOK[b]]
            else:
                tokens += [state, color, UNKNOWN, UNKNOWN]
        return tokens

    def _room_name(self, room: int) -> str:
        return "the {} {}".format(*self._names[room])

    def _item_name(self, item: int) -> str:
        color, noun = self._items[item]
        return f"a {VOCAB[color]} {VOCAB[noun]}"

    def _text(self) -> str:
        goal_room = self._room_name(self._goal_room)
        if self._goal_item >= 0:
            color, noun = self._items[self._goal_item]
            lines = [f"Goal: bring the {VOCAB[color]} {VOCAB[noun]} to {goal_room}."]
        else:
            lines = [f"Goal: go to {goal_room}."]
        hint = [f"in {self._room_name(r)} go {DIRECTIONS[d]}" for r, d in self._hint()[0]]
        if hint:
            lines.append("Directions: " + "; ".join(hint) + ".")
        exits = []
        for direction, other in enumerate(self._neighbors[self._room]):
            if other < 0:
                continue
            state = self._door[self._edge(self._room, direction)]
            name = self._room_name(other) if self._knobs.name_exits else ""
            if state == OPEN:
                what = name or "a passage"
            elif state == CLOSED:
                what = "a closed door" + (f" to {name}" if name else "")
            else:
                what = f"a locked {VOCAB[self._lock_color]} door" + (f" to {name}" if name else "")
            exits.append(f"{DIRECTIONS[direction]} ({what})")
        seen = ", ".join(self._item_name(i) for i in self._room_items[self._room]) or "nothing"
        carried = ", ".join(self._item_name(i) for i in self._inventory) or "nothing"
        lines.append(f"You are in {self._room_name(self._room)}. Exits: {', '.join(exits)}.")
        lines.append(f"You see: {seen}. You carry: {carried}.")
        return "\n".join(lines)

    def _rgb_array(self, tile: int = 12) -> np.ndarray:
        """``"rgb_array"``: a top-down map (agent blue, goal green, doors brown, locked red)."""
        cells = [_cell_xy(c) for c in self._cells]
        xs = [x for x, _ in cells]
        ys = [y for _, y in cells]
        x0, y0 = min(xs), min(ys)
        image = np.full(((max(ys) - y0 + 1) * tile, (max(xs) - x0 + 1) * tile, 3), 30, dtype=np.uint8)
        palette = {OPEN: (200, 200, 200), CLOSED: (150, 90, 40), LOCKED: (200, 40, 40)}
        for room, (x, y) in enumerate(cells):
            color = (
                (60, 90, 230)
                if room == self._room
                else (60, 180, 80)
                if room == self._goal_room
                else (200, 200, 200)
            )
            top, left = (y - y0) * tile, (x - x0) * tile
            image[top + 2 : top + tile - 2, left + 2 : left + tile - 2] = color
            if room > 0:  # the connection to the parent room
                px, py = cells[self._parent[room]]
                cy, cx = top + tile // 2 + (py - y) * tile // 2, left + tile // 2 + (px - x) * tile // 2
                image[cy - 2 : cy + 2, cx - 2 : cx + 2] = palette[self._door[room - 1]]
        return image


def _grow_tree(n: int, route: int, rand: Any) -> tuple[list[int], list[int], list[int]]:
    """Cells of n rooms (:func:`_cell` codes): a self-avoiding route of ``route`` moves, then
    random dead ends; with each room's parent (-1 for the start room) and the parent's direction.

    A room's parent is its earliest-placed neighbour cell, so room order defines the tree.
    """
    while True:  # a self-avoiding walk rarely traps itself for route <= 12; retry if it does
        c = 0
        cells, parents, parent_dir = [0], [-1], [-1]
        taken = {0: 0}  # cell -> room
        tree_path = True  # route room i touches no earlier route room but room i - 1
        for room in range(route):
            free = []  # the directions to untaken cells (unrolled: it is hot)
            if c - 1 not in taken:
                free.append(0)
            if c + _ROW not in taken:
                free.append(1)
            if c + 1 not in taken:
                free.append(2)
            if c - _ROW not in taken:
                free.append(3)
            if not free:
                break
            direction = free[int(rand() * len(free))]
            c += _CELL_STEP[direction]
            # the room just left is one taken neighbour; another one breaks the tree
            if (
                tree_path
                and (c - 1 in taken) + (c + _ROW in taken) + (c + 1 in taken) + (c - _ROW in taken) > 1
            ):
                tree_path = False
            taken[c] = room + 1
            cells.append(c)
            parents.append(room)  # on a tree path, the room just left is the only earlier neighbour
            parent_dir.append(direction ^ 2)
        if len(cells) == route + 1 and tree_path:
            break
    count = len(cells)
    get = taken.get
    while count < n:
        cell = cells[int(rand() * count)] + _CELL_STEP[int(rand() * 4)]
        if cell not in taken:
            # the earliest-placed neighbour (one exists: the cell grew from it)
            p, direction = n, -1
            other = get(cell - 1, n)
            if other < p:
                p, direction = other, 0
            other = get(cell + _ROW, n)
            if other < p:
                p, direction = other, 1
            other = get(cell + 1, n)
            if other < p:
                p, direction = other, 2
            other = get(cell - _ROW, n)
            if other < p:
                p, direction = other, 3
            taken[cell] = count
            cells.append(cell)
            parents.append(p)
            parent_dir.append(direction)
            count += 1
    return cells, parents, parent_dir


def _cell(x: int, y: int) -> int:
    """The code of grid cell (x, y) (|y| < _ROW // 2): one int, so that sets and dicts of cells
    hash fast; the neighbour in direction d is ``code + _CELL_STEP[d]``."""
    return x * _ROW + y


def _cell_xy(code: int) -> tuple[int, int]:
    """(x, y) of a :func:`_cell` code."""
    x = (code + _ROW // 2) // _ROW
    return x, code - x * _ROW
