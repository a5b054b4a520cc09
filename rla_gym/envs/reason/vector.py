"""RLA-Reason-v0's batched vector env with its state in arrays.

:class:`ReasonVectorEnv` serves the ``dict`` and ``flat`` observations (``obs_mode="text"``
keeps the lean loop of :class:`~rla_gym.vector.RLAVectorEnv`). Worksheets are still generated
by the single env's code, one sub-env at a time at its reset, and then read into arrays; every
step after that (the buffer, the checked write, the admissible mask, the token observation, the
exact oracle distance and the oracle's commands) is a fixed number of numpy operations over all
N sub-envs at once. The trajectories are exactly those of single envs given the same tasks and
actions (``tests/test_vector_reason.py``).

The state of a sub-env is small: the rows written (a bitmask), the answer buffer (at most four
characters) and the rejected flag. Strings are compared through *prefix codes*: the first j
characters ``c_0 .. c_{j-1}`` of a string (characters numbered 0-10, ``0123456789-``) code to
``sum_{i<j} (c_i + 1) * 12**i``, a number unique to that prefix, so the buffer starts a value
exactly when its code equals the value's prefix code of the buffer's length. Each row keeps
its value's prefix codes per length (a table over all values in [-999, 999]) and the buffer
keeps its own code, so that:

- a write is right when the buffer's code equals the row value's full code;
- the oracle distance (:meth:`ReasonEnv._distance`) is ``left + len(buffer) - 2 * C``, where C,
  the longest common prefix of the buffer with a ready row's value, follows the buffer: typing
  makes it ``len(buffer)`` if the longer buffer still starts a ready value, and leaves it
  otherwise; erasing cuts it to the shorter buffer; a write empties the buffer and C with it;
- the oracle's commands (:meth:`ReasonEnv._oracle_actions`) come from the ready rows whose value
  starts with the buffer: the value's next character, or the write where the value ends there
  (a per-row table of that command by buffer length, read once per step), and erase when the
  buffer is not empty and starts no ready value (C shorter than the buffer).

A row is ready when it is not written and every row it depends on is (the single env adds rows
to its ready list exactly then); the worksheet tokens change only when a row is written, so
they are rebuilt then, for the sub-envs that wrote, from per-row static tokens (label,
operator, operands, with a row operand's value token once that row is written).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rla_gym.core import Task
from rla_gym.envs.reason.env import ERASE, MINUS, THINK, WRITE_, ReasonEnv
from rla_gym.envs.reason.tasks import (
    BUFFER,
    CHAR_TOK,
    CHARS,
    DONE,
    FAMILIES,
    HIDDEN,
    LABELS,
    MAX_VALUE,
    MEMORY,
    NONE,
    NUM0,
    READY,
    ROWS,
    TOK,
    VARS,
    WAITING,
)
from rla_gym.vector_arrays import ArrayVectorEnv

ROW0 = 4 + 2 * MEMORY  # first worksheet token (after the task and the memory)
BUF0 = ROW0 + 6 * ROWS  # first buffer token
TAIL = BUF0 + BUFFER  # the ok / rejected token
PAD = len(CHARS)  # character number of an empty buffer position
CODE_BASE = 12  # prefix codes are base-12 numerals with digits 1-11
ZERO_CODE, MINUS_CODE = CHARS.index("0") + 1, MINUS + 1  # codes of the buffers "0" and "-"
NO_VALUE = MAX_VALUE + 1  # the value of a row the worksheet does not have
ACTIONS = len(ReasonEnv.action_names)
_POW = CODE_BASE ** np.arange(BUFFER + 1, dtype=np.int64)
_ROW = np.arange(ROWS)
_BIT = np.left_shift(1, _ROW)
_BIT_OR_NONE = np.append(_BIT, 0)  # index ROWS: no row
_CHAIN = np.where(_ROW > 0, np.left_shift(1, np.maximum(_ROW - 1, 0)), 0)  # row r waits for r - 1
_CHAR_TOKENS = np.array([CHAR_TOK[c] for c in CHARS] + [NONE], dtype=np.int64)
_LABEL0 = TOK[LABELS[0]]  # row labels s1..s10 are consecutive tokens
_FAMILY = {name: k for k, name in enumerate(FAMILIES)}
_LIST, _TRACE = _FAMILY["list"], _FAMILY["trace"]
_VAR = {name: k for k, name in enumerate(VARS)}
_OK, _REJECTED, _USED, _UNUSED = TOK["ok"], TOK["rejected"], TOK["used"], TOK["unused"]
_PADDING = [[NO_VALUE] * (ROWS - m) for m in range(ROWS + 1)]
_END, _NOTHING = -1, -2  # in the next-character table: the value ends here, or before


def _value_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each v in [-999, 999] (row ``v + MAX_VALUE``; the last row is ``NO_VALUE``) and each
    buffer length j: the length of ``str(v)``, its prefix code of length j (-1 past the end) and
    its character at j (``_END`` at the end, ``_NOTHING`` past it)."""
    lengths, codes, after = [], [], []
    for v in range(-MAX_VALUE, MAX_VALUE + 1):
        chars = [CHARS.index(c) for c in str(v)]
        prefix = [0]
        for j, c in enumerate(chars):
            prefix.append(prefix[-1] + (c + 1) * CODE_BASE**j)
        past = BUFFER - len(chars)
        lengths.append(len(chars))
        codes.append(prefix + [-1] * past)
        after.append([*chars, _END] + [_NOTHING] * past)
    lengths.append(0)
    codes.append([-1] * (BUFFER + 1))
    after.append([_NOTHING] * (BUFFER + 1))
    return np.array(lengths), np.array(codes, dtype=np.int16), np.array(after)


_LENGTHS, _CODES_OF, _NEXT_OF = _value_table()


@functools.lru_cache(maxsize=4096)
def _allowed_row(allowed: str) -> tuple[bool, ...]:
    """The characters of ``allowed`` as flags in ``CHARS`` order (digits, then the minus sign)."""
    return tuple(c in allowed for c in CHARS)


class ReasonVectorEnv(ArrayVectorEnv):
    """Reason's :class:`~rla_gym.vector_arrays.ArrayVectorEnv`: worksheets and their state in
    arrays (see the module docstring).

    Examples:
        >>> from rla_gym.envs.reason.vector import ReasonVectorEnv
        >>> ReasonVectorEnv(3, difficulty=0.2, obs_mode="flat").reset(seed=0)[0].shape
        (3, 116)
    """

    def __init__(self, num_envs: int, **kwargs: Any) -> None:
        super().__init__(ReasonEnv, num_envs, **kwargs)
        n = self.num_envs
        self._masks[:, THINK] = 1  # always admissible; the other columns are set every step
        # the worksheet, fixed for the episode
        self._last = np.zeros(n, dtype=np.int64)  # index of the answer row
        self._valid = np.zeros((n, ROWS), dtype=bool)  # rows the worksheet has
        self._deps = np.zeros((n, ROWS), dtype=np.int64)  # bitmask of the rows each row waits for
        # value prefix codes and the oracle's command (as an index into the flat oracle array, see
        # _oracle_masks; written by _after_load) of each row by buffer length; read as rows of
        # (n * (BUFFER + 1), ROWS)
        self._codes = np.full((n, BUFFER + 1, ROWS), -1, dtype=np.int16)
        self._full = np.zeros((n, ROWS), dtype=np.int16)  # each value's code
        self._target = np.full((n, BUFFER + 1, ROWS), n * ACTIONS, dtype=np.int64)
        self._layer = self._rows_all * (BUFFER + 1)  # row of sub-env i's buffer length 0 in those
        self._maxlen = np.zeros(n, dtype=np.int64)
        self._allowed = np.zeros((n, len(CHARS)), dtype=bool)
        self._static = np.zeros((n, ROWS, 6), dtype=np.int64)  # label, operator, operands of a row
        self._ref = np.full((n, ROWS, 2), ROWS, dtype=np.int64)  # row operands (ROWS: none)
        self._value_tokens = np.zeros((n, ROWS), dtype=np.int64)
        self._family = np.zeros(n, dtype=np.int64)
        self._rank = np.full((n, MEMORY), ROWS, dtype=np.int64)  # list: the row that uses item i
        self._items = np.zeros((n, MEMORY), dtype=bool)  # list: item slots in use
        self._label_var = np.full((n, ROWS), -1, dtype=np.int64)  # trace: variable a row assigns
        self._start_values = np.zeros((n, MEMORY // 2), dtype=np.int64)  # trace: initial values
        self._variables = np.zeros((n, MEMORY // 2), dtype=bool)  # trace: variable slots in use
        # the running state
        self._written = np.zeros(n, dtype=np.int64)  # bitmask of the rows written
        self._ready = np.zeros((n, ROWS), dtype=bool)
        self._buffer = np.full((n, BUFFER), PAD, dtype=np.int64)  # characters typed
        self._code = np.zeros(n, dtype=np.int16)  # the buffer's code
        self._size = np.zeros(n, dtype=np.int64)  # its length
        self._common = np.zeros(n, dtype=np.int64)  # its longest common prefix with a ready value
        self._rejected = np.zeros(n, dtype=bool)
        self._left = np.zeros(n, dtype=np.int64)  # commands the unwritten rows cost
        #: The arrays a freshly loaded worksheet fills (copied row for row between equal tasks).
        self._world = (
            self._tokens, self._last, self._valid, self._deps, self._codes, self._full, self._maxlen,
            self._allowed, self._static, self._ref, self._value_tokens, self._family, self._rank,
            self._items, self._label_var, self._start_values, self._variables, self._left,
        )  # fmt: skip

    # ---------------------------------------------------------- generation
    def _load(self, rows: np.ndarray, envs: list[ReasonEnv], tasks: list[Task]) -> None:
        """The freshly generated worksheets of ``envs`` into ``rows``."""
        records, allowed = [], []
        for env in envs:
            row_values = [row.value for row in env._rows]
            records.append(
                env._sheet_tokens + row_values + _PADDING[len(row_values)] + [_FAMILY[env._family]]
            )
            allowed.append(_allowed_row(env._allowed))
        record = np.array(records, dtype=np.int64)  # one conversion for all the integers
        sheet, values, family = record[:, :BUF0], record[:, BUF0 : BUF0 + ROWS], record[:, BUF0 + ROWS]
        self._tokens[rows, :BUF0] = sheet
        self._family[rows] = family
        self._allowed[rows] = allowed
        self._left[rows] = self._load_values(rows, values)
        self._load_rows(rows, envs, sheet[:, ROW0:].reshape(-1, ROWS, 6), family)
        if (family >= _LIST).any():  # lists and programs show a memory that writes change
            self._load_memory(rows, envs, family)

    def _after_load(self, rows: np.ndarray) -> None:
        """The oracle's commands (indices into the flat oracle array, so per row) and the
        starting state: nothing written, an empty buffer."""
        after = _NEXT_OF[self._value_tokens[rows] - NUM0 + MAX_VALUE].transpose(0, 2, 1)
        target = np.where(after == _END, WRITE_ + _ROW, after) + (rows * ACTIONS)[:, None, None]
        self._target[rows] = np.where(after == _NOTHING, self.num_envs * ACTIONS, target)
        self._written[rows] = 0
        self._ready[rows] = self._valid[rows] & (self._deps[rows] == 0)
        self._clear_buffer(rows)

    def _load_values(self, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Row values as lengths and prefix codes (looked up); returns the commands all rows cost
        (each value's characters and a write)."""
        at = values + MAX_VALUE
        length = _LENGTHS[at]
        valid = values != NO_VALUE
        sizes = valid.sum(axis=1)
        codes = _CODES_OF[at]
        self._valid[rows] = valid
        self._last[rows] = sizes - 1
        self._codes[rows] = codes.transpose(0, 2, 1)
        self._full[rows] = np.take_along_axis(codes, length[..., None], 2)[..., 0]
        self._maxlen[rows] = length.max(axis=1)
        self._value_tokens[rows] = NUM0 + values
        return length.sum(axis=1) + sizes

    def _load_rows(
        self, rows: np.ndarray, envs: list[ReasonEnv], static: np.ndarray, family: np.ndarray
    ) -> None:
        """Each row's static tokens, row operands and dependencies (the sheet shows them, except
        a trace's statements to come, read from the env)."""
        for k in np.flatnonzero(family == _TRACE).tolist():
            env = envs[k]
            for r, row in enumerate(env._rows):
                operands = (env._operand_token(row.a), env._operand_token(row.b))
                static[k, r, 1:5] = (TOK[row.label], TOK[row.op], *operands)
        operand = static[:, :, 3:5]
        ref = np.where((operand >= _LABEL0) & (operand < _LABEL0 + ROWS), operand - _LABEL0, ROWS)
        static[:, :, 0] = np.where(self._valid[rows], WAITING, 0)
        static[:, :, 5] = np.where(self._valid[rows], NONE, 0)
        self._static[rows] = static
        self._ref[rows] = ref
        used = _BIT_OR_NONE[ref]
        chain = family >= _LIST  # a list or a program goes step by step
        self._deps[rows] = np.where(chain[:, None], _CHAIN, used[..., 0] | used[..., 1])

    def _load_memory(self, rows: np.ndarray, envs: list[ReasonEnv], family: np.ndarray) -> None:
        """A list's items by the row that ticks them off; a program's variables and the rows
        that set them."""
        lists, traces = rows[family == _LIST], rows[family == _TRACE]
        if lists.size:
            ranks, counts = [], []
            for k in np.flatnonzero(family == _LIST).tolist():
                env = envs[k]
                items = env._items
                order: list[int] = list(range(len(items)))  # a running sum: in list order
                if env._header[1] == "kth":  # the k-th smallest: a stable sort, ties in list order
                    order.sort(key=items.__getitem__)
                rank = [ROWS] * MEMORY  # ROWS: no row
                for place, item in enumerate(order):
                    rank[item] = min(place, ROWS)
                ranks.append(rank)
                counts.append(len(items))
            self._rank[lists] = ranks
            self._items[lists] = np.arange(MEMORY) < np.array(counts)[:, None]
        if traces.size:
            starts, counts, labels = [], [], []
            for k in np.flatnonzero(family == _TRACE).tolist():
                env = envs[k]
                start = list(env._start.values())
                starts.append(start + [0] * (MEMORY // 2 - len(start)))
                counts.append(len(start))
                labels.append([_VAR.get(row.label, -1) for row in env._rows] + [-1] * (ROWS - len(env._rows)))
            self._start_values[traces] = starts
            self._variables[traces] = np.arange(MEMORY // 2) < np.array(counts)[:, None]
            self._label_var[traces] = labels

    # ------------------------------------------------------------ dynamics
    def _clear_buffer(self, e: np.ndarray) -> None:
        self._buffer[e] = PAD
        self._code[e] = self._size[e] = self._common[e] = 0
        self._rejected[e] = False

    def _advance(self, active: np.ndarray, actions: np.ndarray, invalid: np.ndarray) -> np.ndarray:
        """Apply ``actions`` to the ``active`` sub-envs; fill ``invalid``; return their success.
        Every row is stepped as a whole column; the others (finished, or just started) are
        masked out and stay as they are."""
        n = self.num_envs
        on, a = None, actions
        if active.size < n:
            on = np.zeros(n, dtype=bool)
            on[active] = True
            a = np.zeros(n, dtype=actions.dtype)
            a[active] = actions
        ok = np.take(self._masks.ravel(), self._rows_all * ACTIONS + a) == 1
        if on is None:
            invalid[:] = ~ok
        else:
            ok &= on
            invalid[:] = on & ~ok
        t = np.flatnonzero(ok & (a <= MINUS))
        if t.size:  # type a character
            c, size = a[t], self._size[t]
            code = self._code[t] + (c + 1) * _POW[size]
            self._buffer[t, size] = c
            self._code[t] = code
            self._size[t] = size + 1
            codes = np.take(self._codes.reshape(-1, ROWS), self._layer[t] + size + 1, axis=0)
            starts = ((codes == code[:, None]) & self._ready[t]).any(axis=1)
            self._common[t] += (self._common[t] == size) & starts
        t = np.flatnonzero(ok & (a == ERASE))
        if t.size:
            size = self._size[t] - 1
            self._code[t] -= (self._buffer[t, size] + 1) * _POW[size]
            self._buffer[t, size] = PAD
            self._size[t] = size
            self._common[t] = np.minimum(self._common[t], size)
        self._rejected &= ~(ok & (a <= ERASE))
        t = np.flatnonzero(ok & (a >= WRITE_) & (a < THINK))
        if t.size:
            row = a[t] - WRITE_
            right = self._code[t] == self._full[t, row]
            self._rejected[t] = ~right  # a wrong value stays in the buffer, flagged
            if right.any():
                self._write(t[right], row[right])
        success = (self._written >> self._last) & 1 == 1
        return success if on is None else success[active]

    def _write(self, e: np.ndarray, row: np.ndarray) -> None:
        """Sub-envs ``e`` write their buffer, which is right, into ``row``."""
        self._left[e] -= self._size[e] + 1
        self._clear_buffer(e)
        written = self._written[e] | _BIT[row]
        self._written[e] = written
        done = (written[:, None] & _BIT) != 0
        self._ready[e] = self._valid[e] & ~done & ((self._deps[e] & ~written[:, None]) == 0)
        self._write_sheet(e, done)

    def _write_sheet(self, e: np.ndarray, written: np.ndarray) -> None:
        """The worksheet and memory tokens of sub-envs ``e`` after a write (the static tokens
        hold a row's unwritten look: WAITING, its operands, NONE for the value; 0 past the end)."""
        k = e.size
        sheet = self._static[e]
        sheet[:, :, 0] = np.where(written, DONE, np.where(self._ready[e], READY, sheet[:, :, 0]))
        done = np.concatenate([written, np.zeros((k, 1), dtype=bool)], axis=1)  # column ROWS: none
        ref = self._ref[e].reshape(k, 2 * ROWS)
        ref_done = np.take_along_axis(done, ref, 1).reshape(k, ROWS, 2)
        value_tokens = self._value_tokens[e]
        ref_value = np.take_along_axis(value_tokens, np.minimum(ref, ROWS - 1), 1).reshape(k, ROWS, 2)
        sheet[:, :, 3:5] = np.where(ref_done, ref_value, sheet[:, :, 3:5])
        sheet[:, :, 5] = np.where(written, value_tokens, sheet[:, :, 5])
        family = self._family[e]
        if (family >= _LIST).any():
            hidden = (family == _TRACE)[:, None] & (_ROW > 0) & ~done[:, np.maximum(_ROW - 1, 0)]
            hidden &= self._valid[e]
            sheet[hidden] = (HIDDEN, NONE, NONE, NONE, NONE, NONE)
            self._write_memory(e, family, done)
        self._tokens[e, ROW0:BUF0] = sheet.reshape(k, 6 * ROWS)

    def _write_memory(self, e: np.ndarray, family: np.ndarray, done: np.ndarray) -> None:
        """A list's ticked items and a program's variables, after a write."""
        lists = family == _LIST
        if lists.any():
            f = e[lists]
            used = np.take_along_axis(done[lists], self._rank[f], 1)
            self._tokens[f, 5:ROW0:2] = np.where(self._items[f], np.where(used, _USED, _UNUSED), NONE)
        traces = family == _TRACE
        if traces.any():
            f = e[traces]
            var = np.arange(MEMORY // 2)[None, :, None]
            sets = done[traces][:, None, :ROWS] & (self._label_var[f][:, None, :] == var)
            last = np.where(sets, _ROW, -1).max(axis=2)  # the last written row assigning the variable
            value = np.take_along_axis(self._value_tokens[f], np.maximum(last, 0), 1)
            value = np.where(last >= 0, value, NUM0 + self._start_values[f])
            self._tokens[f, 5 : 5 + MEMORY : 2] = np.where(self._variables[f], value, NONE)

    # -------------------------------------------------------------- oracle
    def _cost(self, rows: np.ndarray) -> np.ndarray:
        """The distance of each of ``rows``: unwritten rows' commands, plus erasing the buffer
        beyond its common prefix with a ready value, less that prefix typed."""
        sel = self._index(rows)
        return self._left[sel] + self._size[sel] - 2 * self._common[sel]

    def _oracle_masks(self, rows: np.ndarray | None) -> np.ndarray:
        """int8 (k, actions): the commands of ``rows`` (None: all) that lower the exact distance
        by one, scattered into the flat oracle buffer."""
        n, flat = self.num_envs, self._oracle_flat
        flat[:] = 0
        sel = slice(None) if rows is None else rows
        size = self._size[sel]
        layer = self._layer[sel] + size
        codes = np.take(self._codes.reshape(-1, ROWS), layer, axis=0)
        starts = self._ready[sel] & (codes == self._code[sel, None])  # the values the buffer starts
        flat[np.where(starts, np.take(self._target.reshape(-1, ROWS), layer, axis=0), n * ACTIONS)] = 1
        oracle = self._oracle[sel]
        oracle[:, ERASE] = (size > 0) & (self._common[sel] < size)
        return oracle.copy() if rows is None else oracle

    # ------------------------------------------------------------ rendering
    def _refresh(self, rows: np.ndarray | None) -> None:
        """Masks and the buffer tokens of every sub-env from the current state."""
        size, code = self._size, self._code
        minus = code == MINUS_CODE
        masks = self._masks
        masks[:, :PAD] = self._allowed & ((size < self._maxlen) & (code != ZERO_CODE))[:, None]
        masks[:, MINUS] &= size == 0
        masks[:, 0] &= ~minus  # "-0..." is never a value
        masks[:, ERASE] = size > 0
        masks[:, WRITE_:THINK] = self._ready & ((size > 0) & ~minus)[:, None]
        self._tokens[:, BUF0:TAIL] = _CHAR_TOKENS[self._buffer]
        self._tokens[:, TAIL] = np.where(self._rejected, _REJECTED, _OK)


__all__ = ["ReasonVectorEnv"]
