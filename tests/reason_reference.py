"""An independent brute-force solver for RLA-Reason-v0, used to prove the oracle exact.

It recomputes every row's value from the row's operator and operands (and the task's
list, filter or variables), then searches the full symbolic state (rows written,
answer buffer, rejected flag) breadth-first with the typing and writing rules written
out again here. It shares no code with the env's closed-form oracle.
"""

from __future__ import annotations

from collections import deque

from rla_gym.envs.reason import ReasonEnv

DIGITS = "0123456789"


def row_values(env: ReasonEnv) -> list[int]:
    """Each row's correct value, evaluated from the row's own description."""
    header, values, variables = env._header, [], dict(env._start)
    ordered = sorted(env._items)
    for row in env._rows:

        def get(operand) -> int:
            kind, x = operand
            return values[x] if kind == "r" else variables[x] if kind == "v" else x

        op = row.op
        if op == "kth":
            value = ordered[get(row.a) - 1]
        elif op == "scan":
            x, kind = get(row.b), header[2]
            keep = x % 2 == 0 if kind == "even" else x % 2 == 1 if kind == "odd" else None
            if keep is None:
                keep = x > int(header[3]) if kind == "above" else x < int(header[3])
            value = get(row.a) + (x if keep else 0)
        elif op == "not":
            value = 1 - get(row.a)
        elif op == "=" and row.label == "print":
            value = get(row.a)
        else:
            x, y = get(row.a), get(row.b)
            table = {"+": x + y, "-": x - y, "*": x * y, "<": x < y, ">": x > y, "=": x == y}
            value = int(table[op]) if op in table else int(bool(x and y) if op == "and" else bool(x or y))
        values.append(value)
        if row.label in variables:
            variables[row.label] = value
    return values


def _needs(env: ReasonEnv) -> list[set[int]]:
    """Rows each row waits for: the rows it uses, or the previous step in a chain."""
    chain = env._family in ("list", "trace")
    needs = []
    for i, row in enumerate(env._rows):
        used = {o[1] for o in (row.a, row.b) if o is not None and o[0] == "r"}
        needs.append(used | ({i - 1} if chain and i else set()))
    return needs


def _moves(state: tuple, values: list[str], needs: list[set[int]], allowed: str, longest: int) -> list:
    written, buffer, rejected = state
    out = []
    if len(buffer) < longest and buffer != "0":
        for c in allowed:
            if c == "-" and buffer:
                continue
            if c == "0" and buffer == "-":
                continue
            out.append((written, buffer + c, False))
    if buffer:
        out.append((written, buffer[:-1], False))
        if buffer != "-":
            for i, value in enumerate(values):
                if i not in written and needs[i] <= written:
                    out.append((written | {i}, "", False) if buffer == value else (written, buffer, True))
    return out


def bfs_distance(env: ReasonEnv, limit: int) -> int | None:
    """Fewest commands to write every row from the env's current state, or None beyond limit."""
    values = [str(v) for v in row_values(env)]
    needs = _needs(env)
    longest = max(len(v) for v in values)
    written = frozenset(i for i, w in enumerate(env._written) if w)
    start = (written, env._buffer, env._rejected)
    if len(written) == len(values):
        return 0
    seen, frontier = {start}, deque([(start, 0)])
    while frontier:
        state, depth = frontier.popleft()
        if depth >= limit:
            continue
        for nxt in _moves(state, values, needs, env._allowed, longest):
            if nxt in seen:
                continue
            if len(nxt[0]) == len(values):
                return depth + 1
            seen.add(nxt)
            frontier.append((nxt, depth + 1))
    return None
