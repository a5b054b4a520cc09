"""RLA-Reason-v0 tasks: the vocabulary, the difficulty knobs and the four task generators.

A generator compiles a task into worksheet rows (one verified step each) with their values.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from rla_gym.core import check_difficulty, half_up

FAMILIES = ("arithmetic", "logic", "list", "trace")
FILTERS = ("even", "odd", "above", "below")
OPS = ("+", "-", "*", "<", ">", "=", "and", "or", "not", "scan", "kth")
VARS = ("x", "y", "z", "u", "v", "w")
ROWS = 10  # worksheet rows (steps); no task needs more
MEMORY = 12  # list items or variables shown beside the worksheet
BUFFER = 4  # characters of the answer being written: "-999" at most
MAX_VALUE = 999  # every value of every task lies in [-999, 999]
LABELS = tuple(f"s{k + 1}" for k in range(ROWS))
CHARS = "0123456789-"
WORDS = (
    ("<pad>", "<none>", "hidden", "waiting", "ready", "done", "ok", "rejected", "used", "unused")
    + FAMILIES
    + ("sum", "print", "if")
    + FILTERS
    + OPS
    + VARS
    + LABELS
    + tuple(f"#{c}" for c in CHARS)  # buffer characters, distinct from the number tokens
)
VOCAB = WORDS + tuple(str(v) for v in range(-MAX_VALUE, MAX_VALUE + 1))
TOK = {w: i for i, w in enumerate(VOCAB)}
NONE, HIDDEN, WAITING, READY, DONE = (TOK[w] for w in ("<none>", "hidden", "waiting", "ready", "done"))
NUM0 = len(WORDS) + MAX_VALUE  # token id of the number 0
CHAR_TOK = {c: TOK[f"#{c}"] for c in CHARS}

Operand = tuple[str, Any] | None  # ("n", number) | ("r", row index) | ("v", variable name)


class Row(NamedTuple):
    """One step of the worksheet: ``label = a op b``, written once its ``deps`` are done."""

    label: str
    op: str
    a: Operand
    b: Operand
    deps: tuple[int, ...]
    value: int


@dataclass(frozen=True)
class ReasonKnobs:
    """Concrete generation knobs for one difficulty (see :func:`reason_knobs`)."""

    families: tuple[str, ...]
    operations: int
    operand_digits: int
    depth: int
    distractors: int
    operators: str
    max_value: int
    digit_choices: int
    budget_factor: float
    budget_slack: int


def reason_knobs(difficulty: float) -> ReasonKnobs:
    """The documented, monotone map from difficulty to knobs (the table in the docstring)."""
    return _knobs(check_difficulty(difficulty))


@functools.lru_cache(maxsize=1024)
def _knobs(d: float) -> ReasonKnobs:
    operations = 1 + half_up(6 * d)
    return ReasonKnobs(
        families=FAMILIES[: min(4, 1 + math.floor(4 * d))],
        operations=operations,
        operand_digits=1 if d < 0.5 else 2,
        depth=max(math.ceil(math.log2(operations + 1)), 1 + half_up(3 * d)),
        distractors=half_up(4 * d),
        operators="+" if d < 0.25 else "+-" if d < 0.5 else "+-*",
        max_value=9 if d < 0.25 else 99 if d < 0.5 else MAX_VALUE,
        digit_choices=min(10, 3 + half_up(14 * d)),
        budget_factor=4.0 - 2.5 * d,
        budget_slack=half_up(8 * (1 - d)),
    )


# ---------------------------------------------------------------- generators
# Each generator returns (rows, header words, memory) or None to retry; rows are in
# dependency order (a row's deps come before it) and values are bounded by the knobs.
Sheet = tuple[list[Row], tuple[str, ...], list[Any]]


_CALC = {
    "+": lambda x, y: x + y,
    "-": lambda x, y: x - y,
    "*": lambda x, y: x * y,
    "<": lambda x, y: int(x < y),
    ">": lambda x, y: int(x > y),
    "=": lambda x, y: int(x == y),
    "and": lambda x, y: x & y,
    "or": lambda x, y: x | y,
}


def _calc(op: str, x: int, y: int) -> int:
    return _CALC[op](x, y)


def _shape(m: int, depth: int, rand: Any) -> Any:
    """A random binary tree with ``m`` internal nodes and at most ``depth`` levels of them."""
    if m == 0:
        return None
    cap = 2 ** (depth - 1) - 1
    lo, hi = max(0, m - 1 - cap), min(m - 1, cap)
    left = lo + int(rand() * (hi - lo + 1))
    return (_shape(left, depth - 1, rand), _shape(m - 1 - left, depth - 1, rand))


def _value(rows: list[Row], operand: Operand) -> int:
    assert operand is not None
    return rows[operand[1]].value if operand[0] == "r" else operand[1]


def _arithmetic(k: ReasonKnobs, rand: Any) -> Sheet | None:
    rows: list[Row] = []
    top = min(10**k.operand_digits - 1, k.max_value)

    def build(node: Any) -> Operand:
        if node is None:
            return ("n", int(rand() * (top + 1)))
        a, b = build(node[0]), build(node[1])
        x, y = _value(rows, a), _value(rows, b)
        ops = sorted(k.operators, key=lambda _: rand())
        op = next((o for o in ops if abs(_calc(o, x, y)) <= k.max_value), None)
        if op is None:  # every operator overflows here: draw the whole tree again
            raise ValueError
        deps = tuple(o[1] for o in (a, b) if o is not None and o[0] == "r")
        rows.append(Row(LABELS[len(rows)], op, a, b, deps, _calc(op, x, y)))
        return ("r", len(rows) - 1)

    try:
        build(_shape(k.operations, k.depth, rand))
    except ValueError:
        return None
    return rows, ("arithmetic",), []


def _logic(k: ReasonKnobs, rand: Any) -> Sheet:
    negations = 1 - k.operations % 2  # rows = comparisons + connectives (+ one "not" if even)
    binary = (k.operations - negations - 1) // 2
    negate_at = int(rand() * (2 * binary + 1)) if negations else -1
    rows: list[Row] = []
    top = 10**k.operand_digits - 1

    made = [0]  # comparisons and connectives made so far; one of them may get a "not"

    def add(op: str, a: Operand, b: Operand, value: int) -> Operand:
        deps = tuple(o[1] for o in (a, b) if o is not None and o[0] == "r")
        rows.append(Row(LABELS[len(rows)], op, a, b, deps, value))
        made[0] += 1
        if made[0] - 1 == negate_at:
            rows.append(
                Row(LABELS[len(rows)], "not", ("r", len(rows) - 1), None, (len(rows) - 1,), 1 - value)
            )
        return ("r", len(rows) - 1)

    def build(node: Any) -> Operand:
        if node is None:
            cmp = "<>="[int(rand() * 3)]
            x = int(rand() * (top + 1))
            y = x if cmp == "=" and rand() < 0.5 else int(rand() * (top + 1))
            return add(cmp, ("n", x), ("n", y), _calc(cmp, x, y))
        a, b = build(node[0]), build(node[1])
        op = ("and", "or")[int(rand() * 2)]
        return add(op, a, b, _calc(op, _value(rows, a), _value(rows, b)))

    build(_shape(binary, k.depth, rand))
    return rows, ("logic",), []


def _passes(kind: str, threshold: int, x: int) -> bool:
    return {"even": x % 2 == 0, "odd": x % 2 == 1, "above": x > threshold, "below": x < threshold}[kind]


def _list(k: ReasonKnobs, rand: Any) -> Sheet:
    top = 10**k.operand_digits - 1
    if rand() < 0.5:  # k-th smallest: write the smallest, the next, ... up to the k-th
        rank = min(k.operations, ROWS)
        items = [int(rand() * (top + 1)) for _ in range(min(MEMORY, rank + k.distractors))]
        ordered = sorted(items)
        rows = [
            Row(LABELS[i], "kth", ("n", i + 1), None, (i - 1,) if i else (), ordered[i]) for i in range(rank)
        ]
        return rows, ("list", "kth", str(rank)), items
    # filtered sum: write the running total after each item; distractors fail the filter
    n = min(ROWS, k.operations + k.distractors)
    kind = FILTERS[int(rand() * 4)]
    threshold = 1 + int(rand() * (top - 1))
    items = []
    for i in range(n):
        keep = i >= min(k.distractors, n - 1)
        while True:
            x = int(rand() * (top + 1))
            if _passes(kind, threshold, x) == keep:
                break
        items.insert(int(rand() * (len(items) + 1)), x)
    rows, total = [], 0
    for i, x in enumerate(items):
        total += x if _passes(kind, threshold, x) else 0
        previous: Operand = ("r", i - 1) if i else ("n", 0)
        rows.append(Row(LABELS[i], "scan", previous, ("n", x), (i - 1,) if i else (), total))
    shown = str(threshold) if kind in ("above", "below") else "<none>"
    return rows, ("list", "sum", kind, shown), items


def _trace(k: ReasonKnobs, rand: Any) -> Sheet | None:
    used, spare = VARS[:2], VARS[2 : 2 + k.distractors]
    top = 10**k.operand_digits - 1
    start = {name: int(rand() * (top + 1)) for name in used + spare}

    def pick(names: tuple[str, ...]) -> str:
        return names[int(rand() * len(names))]

    def assignment(target: str | None = None) -> tuple[Any, ...]:
        op = pick(tuple(k.operators))
        a = target or pick(used)
        other = used[1 - used.index(a)]
        b: Operand = (
            ("v", other) if op != "*" and rand() < 0.5 else ("n", 2 + int(rand() * (2 if op == "*" else 8)))
        )
        return ("set", target or pick(used), ("v", a), op, b)

    program: list[tuple[Any, ...]] = []
    left = k.operations
    while left:
        kind = "set" if left == 1 else ("set", "if", "repeat")[int(rand() * 3)]
        if kind == "set":
            program.append(assignment())
        elif kind == "if":
            a, b = ("v", pick(used)), ("n", int(rand() * (top + 1)))
            program.append(("if", a, "<>"[int(rand() * 2)], b, assignment(), assignment()))
        else:
            program.append(("repeat", 2 + int(rand() * (min(3, left) - 1)), assignment(pick(used))))
        left -= {"set": 1, "if": 2}.get(kind, program[-1][1])
    values, last = dict(start), used[0]
    rows: list[Row] = []

    def run(statement: tuple[Any, ...]) -> None:
        nonlocal last
        _, target, a, op, b = statement
        value = _calc(op, values[a[1]], values[b[1]] if b[0] == "v" else b[1])
        rows.append(Row(target, op, a, b, (len(rows) - 1,) if rows else (), value))
        values[target], last = value, target

    for statement in program:
        if statement[0] == "set":
            run(statement)
        elif statement[0] == "if":
            _, a, cmp, b, then, other = statement
            truth = _calc(cmp, values[a[1]], b[1])
            rows.append(Row("if", cmp, a, b, (len(rows) - 1,) if rows else (), truth))
            run(then if truth else other)
        else:
            for _ in range(statement[1]):
                run(statement[2])
    rows.append(Row("print", "=", ("v", last), None, (len(rows) - 1,), values[last]))
    if any(abs(row.value) > k.max_value for row in rows):
        return None
    return rows, ("trace", "print", last), [start, program]


GENERATORS = {"arithmetic": _arithmetic, "logic": _logic, "list": _list, "trace": _trace}
