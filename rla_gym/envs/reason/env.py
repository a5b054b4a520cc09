"""RLA-Reason-v0: step-by-step reasoning on a worksheet (arithmetic, logic, lists, program traces)."""

from __future__ import annotations

import random
import string
from typing import Any

import numpy as np

from rla_gym.core import RLAEnv, Task
from rla_gym.envs.reason.tasks import (
    BUFFER,
    CHAR_TOK,
    CHARS,
    DONE,
    GENERATORS,
    HIDDEN,
    LABELS,
    MEMORY,
    NONE,
    NUM0,
    READY,
    ROWS,
    TOK,
    VARS,
    VOCAB,
    WAITING,
    Operand,
    reason_knobs,
)

TYPE_, MINUS, ERASE, WRITE_ = 0, 10, 11, 12
THINK = WRITE_ + ROWS
ACTION_NAMES = (
    tuple(f"type {c}" for c in "0123456789")
    + ("type -", "erase")
    + tuple(f"write slot {k + 1}" for k in range(ROWS))
    + ("think",)
)
_PALETTE = {HIDDEN: (30, 30, 30), WAITING: (120, 120, 120), READY: (230, 200, 40), DONE: (60, 180, 80)}


class ReasonEnv(RLAEnv):
    """Step-by-step reasoning on a worksheet, checked step by step.

    ## Description
    LiveBench-like reasoning as a sequence of small verified steps. A task is one of
    four families: evaluate an arithmetic expression, evaluate a boolean formula of
    comparisons, a list puzzle (the running total of the items passing a filter, or
    the k-th smallest item), or trace a short program (assignments, an ``if``, a
    ``repeat`` loop) and give the printed value. The task is compiled into a
    worksheet of up to 10 rows ("slots"), each one step (``s2 = s1 * 7``,
    ``s3 = 12 + (8 if even)``, ``s1 = smallest #1``, ``x = x + y``, ``print y``); a
    row is *ready* once the rows it uses are done. The agent types a number into
    the answer buffer (digits, a minus sign, erase) and writes it into a ready slot:
    a correct value completes the row (its value replaces its label wherever it is
    used, a list item is ticked off, a variable changes), a wrong one is rejected
    and stays in the buffer, flagged, to be erased. Writing the last row (the
    expression's root, the last list step, ``print``) answers the task.

    ## Difficulty
    ``difficulty`` d in [0, 1] sets every knob through one monotone table
    (:func:`reason_knobs`):

    | knob | formula (round = half up) | d=0 | 0.25 | 0.5 | 0.75 | 1 |
    |---|---|---|---|---|---|---|
    | families (drawn uniformly) | first 1 + floor(4d) of arithmetic, logic, list, trace | arithmetic | +logic | +list | +trace | +trace |
    | operations (operators / list steps / executed statements) | 1 + round(6d) | 1 | 3 | 4 | 6 | 7 |
    | operand digits | 1 below 0.5, else 2 | 1 | 1 | 2 | 2 | 2 |
    | nesting depth (most levels of operators) | max(ceil(log2(operations + 1)), 1 + round(3d)) | 1 | 2 | 3 | 3 | 4 |
    | distractors (filtered-out or larger list items, unused variables) | round(4d) | 0 | 1 | 2 | 3 | 4 |
    | operators | + below .25, +- below .5, else +-* | + | +- | +-* | +-* | +-* |
    | largest value | 9 below .25, 99 below .5, else 999 | 9 | 99 | 999 | 999 | 999 |
    | admissible digits (at least those needed) | min(10, 3 + round(14d)) | 3 | 7 | 10 | 10 | 10 |
    | step budget | ceil(optimal_len * (4 - 2.5d)) + round(8 (1-d)) | 4x+8 | 3.4x+6 | 2.8x+4 | 2.1x+2 | 1.5x |

    At d=0 the task is one sum of two digits below 10, to be typed with one of three
    admissible digits.

    ## Observation
    ``obs_mode="dict"`` (default): ``tokens``, a ``Box(0, V-1, (93,), int64)`` of word
    ids in a fixed layout: the task (4: family, kind, two parameters), memory (12 x 2:
    list items and whether each is used, or variables and their current values),
    the worksheet (10 rows x 6: status hidden / waiting / ready / done, label,
    operator, two operands with done rows replaced by their values, value), and the
    answer buffer (4 characters + ok / rejected); numbers in [-999, 999] are single
    tokens. ``action_mask``, a ``MultiBinary(23)``. ``"flat"``: both concatenated in
    one float32 ``Box``. ``"text"``: the same content as text (the expression
    reduced so far, the list, the program and its variables, the worksheet, the
    buffer), a ``Text`` space.

    ## Action
    ``Discrete(23)``: type a digit 0-9, type a minus sign, erase the last character,
    write the buffer into slot 1-10, think (the no-op). Admissible: the task's
    digits (and the minus sign where values may be negative) while the buffer is
    shorter than the longest value and stays a well-formed number, erase when the
    buffer is not empty, write into a ready slot when the buffer holds a number.
    Inadmissible commands are masked (``action_masks()``); taking one anyway is a
    no-op flagged in ``info["invalid_action"]``.

    ## Reward
    Sparse: 1.0 on the step that writes the last row, 0.0 otherwise. No shaping.

    ## Episode end
    Terminated when every row is written (``is_success=True``, ``outcome=+1``);
    truncated when the step budget runs out (``outcome=-1``). Wrong writes never end
    the episode: they are rejected.

    ## Oracle
    Exact, in closed form: every row costs its value's characters plus one write,
    rows can be written in any order their dependencies allow, and only the buffer
    carries over between rows. So the distance is the cost of the rows left plus
    ``min over ready rows r of len(buffer) - 2 * common_prefix(buffer, value_r)``
    (erase to the shared prefix, type the rest); ``info["oracle_mask"]`` marks
    every command that lowers it by one (write a finished value, type the next
    character of a ready value, or erase a buffer that starts none).
    ``info["progress"]`` is +1 / 0 / -1 by that distance, and ``info["optimal_len"]``
    is the optimal solution length from the episode's start.

    ## Version history
    - v0: initial release.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}  # noqa: RUF012
    env_id = "RLA-Reason-v0"
    vocab = VOCAB
    token_length = 4 + 2 * MEMORY + 6 * ROWS + BUFFER + 1
    action_names = ACTION_NAMES
    noop_action = THINK
    text_max_length = 1200  # about twice the longest text seen (a 10-item list sum at d=1)
    text_charset = string.ascii_letters + string.digits + " .,:;=+-*<>()[]#?_'\n"

    # ------------------------------------------------------------ generation
    def _generate(self, task: Task) -> None:
        k = reason_knobs(task.difficulty)
        self._knobs = k
        rand = random.Random(task.seed).random
        self._family = k.families[int(rand() * len(k.families))]
        sheet = None
        while sheet is None:  # a few operator draws overflow the value bound; draw again
            sheet = GENERATORS[self._family](k, rand)
        self._rows, self._header, memory = sheet
        self._items: list[int] = memory if self._family == "list" else []
        self._start: dict[str, int] = memory[0] if self._family == "trace" else {}
        self._program: list[tuple[Any, ...]] = memory[1] if self._family == "trace" else []
        self._strings = [str(row.value) for row in self._rows]
        self._maxlen = max(map(len, self._strings))
        needed = set("".join(self._strings))
        needed.discard("-")
        spare = [c for c in "0123456789" if c not in needed]
        while len(needed) < k.digit_choices:
            needed.add(spare.pop(int(rand() * len(spare))))
        negative = "-" in k.operators and self._family in ("arithmetic", "trace")
        self._allowed = "".join(sorted(needed)) + ("-" if negative else "")
        self._written = [False] * len(self._rows)
        self._ready = [i for i, row in enumerate(self._rows) if not row.deps]
        self._left = sum(map(len, self._strings)) + len(self._strings)
        self._buffer = ""
        self._rejected = False
        self._sheet_tokens = self._make_sheet_tokens()

    # ------------------------------------------------------------ dynamics
    def _apply(self, action: int) -> None:
        if action <= MINUS:
            self._buffer += CHARS[action]
            self._rejected = False
        elif action == ERASE:
            self._buffer = self._buffer[:-1]
            self._rejected = False
        elif action < THINK:
            row = action - WRITE_
            if self._buffer != self._strings[row]:
                self._rejected = True  # the checker refuses it; the buffer stays to be erased
                return
            self._written[row] = True
            self._left -= len(self._buffer) + 1
            self._buffer = ""
            self._rejected = False
            self._ready.remove(row)
            for i in range(row + 1, len(self._rows)):  # dependents always come later
                deps = self._rows[i].deps
                if row in deps and i not in self._ready and all(self._written[j] for j in deps):
                    self._ready.append(i)
            self._sheet_tokens = self._make_sheet_tokens()

    def _action_mask(self) -> list[int]:
        mask = [0] * len(ACTION_NAMES)
        buffer = self._buffer
        if len(buffer) < self._maxlen and buffer != "0":
            for c in self._allowed:
                if c != "-" or not buffer:
                    mask["0123456789-".index(c)] = 1
            if buffer == "-":
                mask[0] = 0  # "-0..." is never a value
        if buffer:
            mask[ERASE] = 1
            if buffer != "-":
                for row in self._ready:
                    mask[WRITE_ + row] = 1
        mask[THINK] = 1
        return mask

    def _success(self) -> bool:
        return self._written[-1]

    # ------------------------------------------------------------ oracle
    def _extra(self, buffer: str) -> int:
        """Commands the buffer costs (or saves, if negative) on the way to the best ready row."""
        if not buffer:
            return 0
        best = len(buffer)
        for row in self._ready:
            value = self._strings[row]
            common = 0
            for x, y in zip(buffer, value, strict=False):
                if x != y:
                    break
                common += 1
            best = min(best, len(buffer) - 2 * common)
        return best

    def _distance(self) -> int:
        return self._left + self._extra(self._buffer)

    def _oracle_actions(self) -> list[int]:
        buffer, n = self._buffer, len(self._buffer)
        best: set[int] = set()
        starts_any = False
        for row in self._ready:
            value = self._strings[row]
            if value.startswith(buffer):
                starts_any = True
                if len(value) == n:
                    best.add(WRITE_ + row)
                else:
                    best.add(CHARS.index(value[n]))
        if n and not starts_any:
            best.add(ERASE)
        return sorted(best)

    # ------------------------------------------------------------ rendering
    def _operand_token(self, operand: Operand) -> int:
        if operand is None:
            return NONE
        kind, x = operand
        if kind == "r":
            return NUM0 + self._rows[x].value if self._written[x] else TOK[LABELS[x]]
        return TOK[x] if kind == "v" else NUM0 + x

    def _make_sheet_tokens(self) -> list[int]:
        """Task, memory and worksheet tokens: they change only when a row is written."""
        tokens = [TOK[w] for w in self._header] + [NONE] * (4 - len(self._header))
        memory: list[int] = []
        if self._family == "list":
            used = self._used_items()
            for i, x in enumerate(self._items):
                memory += [NUM0 + x, TOK["used" if used[i] else "unused"]]
        elif self._family == "trace":
            for name, value in self._variables().items():
                memory += [TOK[name], NUM0 + value]
        tokens += memory + [NONE] * (2 * MEMORY - len(memory))
        for i, row in enumerate(self._rows):
            if not self._visible(i):
                tokens += [HIDDEN] + [NONE] * 5
                continue
            status = DONE if self._written[i] else READY if i in self._ready else WAITING
            value = NUM0 + row.value if self._written[i] else NONE
            a, b = self._operand_token(row.a), self._operand_token(row.b)
            tokens += [status, TOK[row.label], TOK[row.op], a, b, value]
        return tokens + [0] * (6 * (ROWS - len(self._rows)))

    def _visible(self, row: int) -> bool:
        """A trace shows the statements executed so far and the next one, not the branch to come."""
        return self._family != "trace" or row == 0 or self._written[row - 1]

    def _used_items(self) -> list[bool]:
        """List items ticked off: scanned ones, or the smallest ones already written."""
        if self._header[1] == "sum":
            return self._written[: len(self._items)]
        used = [False] * len(self._items)
        for row, done in zip(self._rows, self._written, strict=True):
            if done:
                used[next(i for i, x in enumerate(self._items) if x == row.value and not used[i])] = True
        return used

    def _variables(self) -> dict[str, int]:
        values = dict(self._start)
        for row, done in zip(self._rows, self._written, strict=True):
            if done and row.label in values:
                values[row.label] = row.value
        return values

    def _tokens(self) -> list[int]:
        buffer = [CHAR_TOK[c] for c in self._buffer]
        tail = [TOK["rejected" if self._rejected else "ok"]]
        return self._sheet_tokens + buffer + [NONE] * (BUFFER - len(buffer)) + tail

    def _operand_text(self, operand: Operand, bracket: bool = False) -> str:
        assert operand is not None
        kind, x = operand
        if kind != "r":
            return str(x)
        if self._written[x]:
            return str(self._rows[x].value)
        return f"({self._expression(x)})" if bracket else LABELS[x]

    def _expression(self, row: int, original: bool = False) -> str:
        """The expression of ``row``, with rows already written replaced by their values."""
        r = self._rows[row]
        if self._written[row] and not original:
            return str(r.value)

        def sub(o: Operand) -> str:
            assert o is not None
            if o[0] == "n":
                return str(o[1])
            inner = self._expression(o[1], original)
            return inner if not original and self._written[o[1]] else f"({inner})"

        return f"not {sub(r.a)}" if r.op == "not" else f"{sub(r.a)} {r.op} {sub(r.b)}"

    def _row_text(self, i: int) -> str:
        row = self._rows[i]
        a = self._operand_text(row.a) if row.a else ""
        b = self._operand_text(row.b) if row.b else ""
        if row.op == "kth":
            text = f"smallest #{a}"
        elif row.op == "scan":
            text = f"{a} + ({b} if {self._filter_text()})"
        elif row.op == "not":
            text = f"not {a}"
        elif row.label in VARS:
            text = f"{row.label} = {a} {row.op} {b}"
        elif row.label == "if":
            text = f"if {a} {row.op} {b}"
        elif row.label == "print":
            text = f"print {a}"
        else:
            text = f"{a} {row.op} {b}"
        if self._written[i]:
            return f"{LABELS[i]}: {text}  => {row.value}"
        return f"{LABELS[i]}: {text}  => ?" if i in self._ready else f"{LABELS[i]}: {text}  (waiting)"

    def _filter_text(self) -> str:
        kind = self._header[2]
        return f"{kind} {self._header[3]}" if kind in ("above", "below") else kind

    def _statement_text(self, statement: tuple[Any, ...]) -> str:
        if statement[0] == "set":
            _, target, a, op, b = statement
            return f"{target} = {a[1]} {op} {b[1]}"
        if statement[0] == "if":
            _, a, cmp, b, then, other = statement
            return f"if {a[1]} {cmp} {b[1]}: {self._statement_text(then)} else: {self._statement_text(other)}"
        return f"repeat {statement[1]}: {self._statement_text(statement[2])}"

    def _text(self) -> str:
        family, root = self._family, len(self._rows) - 1
        if family in ("arithmetic", "logic"):
            lines = [f"Task: evaluate {self._expression(root, original=True)} step by step."]
            if family == "logic":
                lines[0] += " Write 1 for true, 0 for false."
            lines.append(f"Now: {self._expression(root)}")
        elif family == "list":
            used = self._used_items()
            shown = ", ".join(str(x) for x in self._items)
            if self._header[1] == "sum":
                lines = [
                    f"Task: add up the items of [{shown}] that are {self._filter_text()}, left to right."
                ]
            else:
                lines = [f"Task: find item #{self._header[2]} of [{shown}] in increasing order."]
            lines.append(
                "List: " + " ".join(f"[{x}]" if u else str(x) for x, u in zip(self._items, used, strict=True))
            )
        else:
            lines = ["Task: trace the program and give the value it prints.", "Program:"]
            lines.append("  " + ", ".join(f"{name} = {value}" for name, value in self._start.items()))
            lines += ["  " + self._statement_text(s) for s in self._program] + [f"  print {self._header[2]}"]
            lines.append("Variables: " + ", ".join(f"{n} = {v}" for n, v in self._variables().items()))
        lines.append("Worksheet:")
        lines += ["  " + self._row_text(i) for i in range(len(self._rows)) if self._visible(i)]
        lines.append(f"Writing: {self._buffer}_" + (" (rejected)" if self._rejected else ""))
        return "\n".join(lines)

    def _rgb_array(self) -> np.ndarray:
        """``"rgb_array"``: the worksheet rows by status (ready yellow, done green), then the buffer."""
        tile = 12
        image = np.full(((ROWS + 1) * tile, (BUFFER + 2) * tile, 3), 20, dtype=np.uint8)
        tokens = self._sheet_tokens[4 + 2 * MEMORY :]
        for i in range(len(self._rows)):
            color = _PALETTE[tokens[6 * i]]
            image[i * tile + 2 : (i + 1) * tile - 2, 2 : (BUFFER + 2) * tile - 2] = color
        top = ROWS * tile
        for j in range(len(self._buffer)):
            image[top + 2 : top + tile - 2, j * tile + 2 : (j + 1) * tile - 2] = (60, 90, 230)
        if self._rejected:
            image[top + 2 : top + tile - 2, (BUFFER + 1) * tile + 2 : (BUFFER + 2) * tile - 2] = (200, 40, 40)
        return image
