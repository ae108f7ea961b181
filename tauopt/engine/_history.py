"""History: an experiment's observations held as columns, objects made on read.

One `Observation` object per row costs about a kilobyte once its dicts, ids and
floats are counted; a long history is mostly that. Here each field is a typed
array (ids as integers, values and times as doubles, a parameter's values as
doubles, integers or codes into its distinct values, the observed suggestion's
tag, time and attempts beside its observation), and `history[i]` builds the
Observation when a reader asks for it. A row whose fields do not fit the
columns (an id that is not a plain number, other metrics, a type the column was
not made for) is kept whole as the object it is: exact, only not compact.

The dedup set of observed points is their keys' hashes, a column per row, sorted
(the newest few thousand in a small set until they are merged in), with a
one-hash Bloom filter in front: "is this point observed?" is one bit for most new
points, else a binary search, and a hit is confirmed against the rows with the
same hash (the keys compared, not their hashes: two points never count as one).

The ledger appends; nothing else changes a row except `set_last` (a stopped
trial's step, written right after its observation).
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, overload

import numpy as np

from ..models import Observation, Suggestion, Value
from ..space import Key

__all__ = ["History", "HistoryView"]

_NONE = -1  # an integer column's "absent" (ids and steps are never negative)
_NOT_HELD = -2  # suggestion tag code: the suggestion is not held by this row (the ledger keeps it)
_TAIL = 256  # rows appended before they enter the columns together
_BITS_MIN = 1024  # bytes of the filter at the start (a power of two)
_RECENT = 4096  # hashes kept in a set before they are merged into the sorted array (and n / 8 at most)


def _plain_id(text: str | None) -> int:
    """text as a non-negative integer if it is one written plainly ("12", not "012"), else -2."""
    if text is None:
        return _NONE
    if text.isdigit() and text.isascii() and (text[0] != "0" or len(text) == 1) and len(text) < 19:  # fits 8 bytes
        return int(text)
    return -2


def _holds(s: Suggestion, o: Observation) -> bool:
    """Can o's row stand for its suggestion s (observed, the same point in the same order)?"""
    return (
        s.id == o.suggestion_id and s.state == "observed" and not s.released and s.experiment_id == o.experiment_id
        and (s.assignments is o.assignments or list(s.assignments.items()) == list(o.assignments.items()))
    )  # fmt: skip


class _Column:
    """One parameter's values: doubles, integers, or codes into its distinct values."""

    __slots__ = ("kind", "data", "distinct", "code_of")

    def __init__(self, sample: Value, rows: int) -> None:
        t = type(sample)
        self.kind = "d" if t is float else "q" if t is int else "c"
        self.data = array("d" if self.kind == "d" else "q", bytes(8 * rows))  # earlier rows: unused filler
        self.distinct: list[Value] = []
        self.code_of: dict[tuple[type, Value], int] = {}

    def fits(self, value: Value) -> bool:
        t = type(value)
        if self.kind == "d":
            return t is float
        if self.kind == "q":
            return t is int and -(2**63) <= value < 2**63  # type: ignore[operator]
        return t is str or t is bool or value is None or t is float or t is int

    def encode(self, value: Value) -> float | int:
        if self.kind != "c":
            return value  # type: ignore[return-value]
        k = (type(value), value)
        code = self.code_of.get(k)
        if code is None:
            code = self.code_of[k] = len(self.distinct)
            self.distinct.append(value)
        return code


INLINE_ROWS = 2000  # rows of history made into objects on the event loop at most (a listing, an actor's rebuild); more in a thread


class _Rows(Sequence[Observation]):
    """A Sequence of Observation over the first rows of a History (`_rows_of`)."""

    __slots__ = ()

    def _rows_of(self) -> tuple["History", int]:
        raise NotImplementedError

    def __len__(self) -> int:
        return self._rows_of()[1]

    @overload
    def __getitem__(self, i: int) -> Observation: ...
    @overload
    def __getitem__(self, i: slice) -> list[Observation]: ...
    def __getitem__(self, i: int | slice) -> Observation | list[Observation]:
        history, n = self._rows_of()
        if isinstance(i, slice):
            return [history._row(r) for r in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("history index out of range")
        return history._row(i)

    def __iter__(self) -> Iterator[Observation]:
        history, n = self._rows_of()
        row = history._row
        for r in range(n):
            yield row(r)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return tuple, (list(self),)  # what crosses to a worker process: the objects

    def rows(self, start: int = 0, failed: bool | None = None, limit: int | None = None) -> list[Observation]:
        """Observations from row `start` on, only the failed (or only the others) when `failed`
        is given, at most `limit`: only those are made into objects. A view's rows may be read
        in another thread while the history grows: it reads copies of the columns it filters
        on, never buffers of the live ones (an exported buffer would stop the next append)."""
        history, n = self._rows_of()
        if failed is None:
            stop = n if limit is None else min(n, start + limit)
            return [history._row(r) for r in range(start, stop)]
        flags = np.frombuffer(history._failed[start:n], dtype=np.uint8).astype(bool)
        for r, o in list(history._whole.items()):
            if start <= r < n:
                flags[r - start] = o.failed is True
        picked = np.flatnonzero(flags if failed else ~flags)
        if limit is not None:
            picked = picked[:limit]
        return [history._row(start + r) for r in picked.tolist()]


class History(_Rows):
    """An experiment's observations in arrival order (a Sequence of Observation)."""

    def __init__(self, experiment_id: str, primary: str, key: Callable[[dict[str, Value]], Key]) -> None:
        self.experiment_id = experiment_id
        self._primary = primary
        self._key = key
        self._n = 0
        self._oid = array("q")
        self._sid = array("q")  # _NONE: unsolicited
        self._value = array("d")  # nan: none (a failed run)
        self._failed = bytearray()
        self._created = array("d")
        self._stopped = array("q")  # _NONE: not stopped early
        self._layout = array("h")  # which parameters the row has, in its order: an index into _layouts
        self._layouts: list[tuple[str, ...]] = []
        self._layout_of: dict[tuple[str, ...], int] = {}
        self._columns: dict[str, _Column] = {}
        # the observed suggestion, when this row holds it: its tag (code), hand-out time, attempts
        self._s_tag = array("i")
        self._s_created = array("d")
        self._s_attempts = array("i")
        self._tags: list[str | None] = []
        self._tag_code: dict[str | None, int] = {}
        self._hash = array("q")  # the row's dedup key hash
        # the hashes sorted, up to some row; the rows after it in a small set (re-sorted as it grows)
        self._sorted = np.empty(0, dtype=np.int64)
        self._recent: set[int] = set()
        # a one-hash Bloom filter over every row's hash, 8 to 16 bits a row: "never seen" in one lookup
        self._bits = bytearray(_BITS_MIN)
        self._bit_mask = _BITS_MIN - 1
        self._tail: list[tuple[Observation, Suggestion | None, int]] = []  # appended, not yet in the columns
        self.on_held: Callable[[list[str]], None] | None = None  # told the ids of suggestions rows took over
        self._whole: dict[int, Observation] = {}  # rows that do not fit the columns
        self._whole_suggestions: dict[int, Suggestion] = {}  # their suggestions, when held

    # -- appending ------------------------------------------------------------------

    def append(self, o: Observation, held: Suggestion | None = None, key: Key | None = None) -> None:
        """Add `o` (the next row). `held`: its suggestion, observed, for the row to keep (the
        ledger's `on_held` is told when it does). Rows wait in a short tail and enter the
        columns a batch at a time (`_settle`): an observe costs a list append, and a batch
        is read column by column."""
        h = hash(self._key(o.assignments) if key is None else key)
        self._recent.add(h)
        self._tail.append((o, held, h))
        self._bits[(h >> 3) & self._bit_mask] |= 1 << (h & 7)
        if self._n + len(self._tail) > len(self._bits):  # under 8 bits a point: twice the bits
            self._spread_bits(2 * len(self._bits))
        if len(self._tail) >= _TAIL:
            self._settle()
        if len(self._recent) > max(_RECENT, self._n >> 3):
            self._settle()
            self._sort_hashes()

    def _settle(self) -> None:
        """The tail's rows into the columns, a batch at once when they all fit the fast way."""
        tail = self._tail
        if not tail:
            return
        self._tail = []
        held_ids = self._fold_fast(tail)
        if held_ids is None:
            held_ids = [o.suggestion_id for o, held, h in tail if self._append_row(o, held, h)]  # type: ignore[misc]
        if held_ids and self.on_held is not None:
            self.on_held(held_ids)

    def _fold_fast(self, tail: list[tuple[Observation, Suggestion | None, int]]) -> list[str] | None:
        """The tail added column by column when every row is plain (plain ids, one metric, the
        layout and column types of the first row, known columns); None (nothing added) if not."""
        eid, primary = self.experiment_id, self._primary
        names = tuple(tail[0][0].assignments)
        layout = self._layout_of.get(names)
        if layout is None:
            return None
        cols = [self._columns[name] for name in names]
        if len(cols) != len(self._columns):
            return None
        holds, values, sids = [], [], []
        for o, held, _ in tail:
            v = o.value
            if not (o.experiment_id == eid and not o.metrics and type(o.created_at) is float and type(o.failed) is bool
                    and o.stopped_at_step is None and _plain_id(o.id) >= 0 and tuple(o.assignments) == names):  # fmt: skip
                return None
            if v is None:
                if o.values or not o.failed:
                    return None
                values.append(math.nan)
            elif type(v) is not float or v != v or len(o.values) != 1 or o.values.get(primary) != v:
                return None
            else:
                values.append(v)
            sid = o.suggestion_id
            n = _NONE if sid is None else _plain_id(sid)
            if n < -1:
                return None
            sids.append(n)
            keep = held is not None and _holds(held, o)
            if keep and (type(held.created_at) is not float or type(held.attempts) is not int or held.attempts > 2**31 - 1):  # type: ignore[union-attr]
                return None
            holds.append(held if keep else None)
        encoded: list[list[Any]] = []
        for name, col in zip(names, cols):
            column = [o.assignments[name] for o, _, _ in tail]
            if not all(map(col.fits, column)):
                return None
            encoded.append(list(map(col.encode, column)) if col.kind == "c" else column)
        for col, column in zip(cols, encoded):
            col.data.extend(column)  # type: ignore[arg-type]
        k = len(tail)
        self._n += k
        self._layout.extend([layout] * k)
        self._oid.extend([int(o.id) for o, _, _ in tail])
        self._sid.extend(sids)
        self._value.extend(values)
        self._failed.extend([o.failed for o, _, _ in tail])
        self._created.extend([o.created_at for o, _, _ in tail])
        self._stopped.extend([_NONE] * k)
        self._hash.extend([h for _, _, h in tail])
        self._s_tag.extend([_NOT_HELD if s is None else self._tag(s.tag) for s in holds])
        self._s_created.extend([0.0 if s is None else s.created_at for s in holds])
        self._s_attempts.extend([0 if s is None else s.attempts for s in holds])
        return [s.id for s in holds if s is not None]

    def _tag(self, tag: str | None) -> int:
        code = self._tag_code.get(tag)
        if code is None:
            code = self._tag_code[tag] = len(self._tags)
            self._tags.append(tag)
        return code

    def _append_row(self, o: Observation, held: Suggestion | None, h: int) -> bool:
        """One row into the columns (or kept whole); True when it holds `held`."""
        self._hash.append(h)
        row = self._n
        self._n += 1
        holds = held is not None and _holds(held, o)
        if not self._fits(o, held if holds else None):
            self._whole[row] = o
            if holds:
                self._whole_suggestions[row] = held  # type: ignore[assignment]
            self._pad(o, holds)
            return holds
        names = tuple(o.assignments)
        layout = self._layout_of.get(names)
        if layout is None:
            layout = self._layout_of[names] = len(self._layouts)
            self._layouts.append(names)
        self._layout.append(layout)
        columns = self._columns
        for name, v in o.assignments.items():
            col = columns.get(name)
            if col is None:
                col = columns[name] = _Column(v, row)
            col.data.append(col.encode(v))  # type: ignore[arg-type]  # an int column's values are ints
        for name, col in columns.items():
            if len(col.data) == row:
                col.data.append(0)
        self._oid.append(int(o.id))
        self._sid.append(_NONE if o.suggestion_id is None else int(o.suggestion_id))
        self._value.append(math.nan if o.value is None else o.value)
        self._failed.append(o.failed)
        self._created.append(o.created_at)
        self._stopped.append(_NONE if o.stopped_at_step is None else o.stopped_at_step)
        if holds:
            assert held is not None
            self._s_tag.append(self._tag(held.tag))
            self._s_created.append(held.created_at)
            self._s_attempts.append(held.attempts)
        else:
            self._s_tag.append(_NOT_HELD)
            self._s_created.append(0.0)
            self._s_attempts.append(0)
        return holds

    def _fits(self, o: Observation, held: Suggestion | None) -> bool:
        if o.experiment_id != self.experiment_id or o.metrics or _plain_id(o.id) < 0:
            return False
        if o.suggestion_id is not None and _plain_id(o.suggestion_id) < 0:
            return False
        v = o.value
        if v is None:
            if o.values or not o.failed:
                return False
        elif type(v) is not float or math.isnan(v) or len(o.values) != 1 or o.values.get(self._primary) != v:
            return False
        if type(o.created_at) is not float or type(o.failed) is not bool:
            return False
        if o.stopped_at_step is not None and (type(o.stopped_at_step) is not int or not 0 <= o.stopped_at_step < 2**63):
            return False
        if held is not None and (type(held.created_at) is not float or type(held.attempts) is not int or held.attempts > 2**31 - 1):
            return False
        if len(self._layouts) >= 2**15 - 1 and tuple(o.assignments) not in self._layout_of:
            return False
        columns = self._columns
        for name, val in o.assignments.items():
            col = columns.get(name)
            if col is None:
                if (type(val) is float and math.isnan(val)) or (type(val) is int and not -(2**63) <= val < 2**63):
                    return False
            elif not col.fits(val):
                return False
        return True

    def _pad(self, o: Observation, holds: bool) -> None:
        """A whole row's place in the columns (never read: `_whole` answers for it)."""
        for col in self._columns.values():
            col.data.append(0)
        self._layout.append(-1)
        for arr in (self._oid, self._sid, self._stopped):
            arr.append(-3)
        self._value.append(math.nan)
        self._failed.append(0)
        self._created.append(0.0)
        self._s_tag.append(_NOT_HELD)
        self._s_created.append(0.0)
        self._s_attempts.append(0)

    def set_last(self, o: Observation) -> None:
        """The last row becomes `o` (the same observation with its stopped step)."""
        self._settle()
        row = self._n - 1
        step = o.stopped_at_step
        if row in self._whole or step is None or type(step) is not int or not 0 <= step < 2**63:
            self._whole[row] = o
        else:
            self._stopped[row] = step

    # -- reading ----------------------------------------------------------------------

    def _rows_of(self) -> tuple["History", int]:
        self._settle()
        return self, self._n

    def __len__(self) -> int:
        return self._n + len(self._tail)  # without settling: the engine counts on every observe

    def assignments(self, row: int) -> dict[str, Value]:
        whole = self._whole.get(row)
        if whole is not None:
            return whole.assignments
        out: dict[str, Value] = {}
        columns = self._columns
        for name in self._layouts[self._layout[row]]:
            col = columns[name]
            v = col.data[row]
            out[name] = col.distinct[v] if col.kind == "c" else v  # type: ignore[index]
        return out

    def _row(self, row: int) -> Observation:
        whole = self._whole.get(row)
        if whole is not None:
            return whole
        v: float | None = self._value[row]
        if v != v:  # nan
            v = None
        sid = self._sid[row]
        stopped = self._stopped[row]
        return Observation(
            str(self._oid[row]), self.experiment_id, None if sid == _NONE else str(sid), self.assignments(row), v,
            bool(self._failed[row]), self._created[row], {}, None if stopped == _NONE else stopped,
            {} if v is None else {self._primary: v},
        )  # fmt: skip

    def held_suggestion(self, sid: str) -> tuple[Suggestion, float] | None:
        """The observed suggestion `sid` held by a row, with when it was observed; None if no row holds it."""
        self._settle()
        n = _plain_id(sid)
        if n < 0:
            return None
        rows = np.flatnonzero(np.frombuffer(self._sid, dtype=np.int64, count=self._n) == n)
        for r in rows.tolist():
            if self._s_tag[r] != _NOT_HELD:
                return self._held(r, sid), self._created[r]
        for r, s in self._whole_suggestions.items():
            if s.id == sid:
                return s, self._whole[r].created_at
        return None

    def held_many(self, sids: list[str]) -> dict[str, tuple[Suggestion, float]]:
        """held_suggestion for each of sids, in one pass over the rows."""
        self._settle()
        wanted = [n for n in map(_plain_id, sids) if n >= 0]
        out: dict[str, tuple[Suggestion, float]] = {}
        if wanted:
            column = np.frombuffer(self._sid, dtype=np.int64, count=self._n)
            for r in np.flatnonzero(np.isin(column, wanted)).tolist():
                if self._s_tag[r] != _NOT_HELD and str(self._sid[r]) not in out:
                    out[str(self._sid[r])] = (self._held(r, str(self._sid[r])), self._created[r])
        for r, s in self._whole_suggestions.items():
            if s.id in sids and s.id not in out:
                out[s.id] = (s, self._whole[r].created_at)
        return out

    def _held(self, r: int, sid: str) -> Suggestion:
        return Suggestion(sid, self.experiment_id, self.assignments(r), "observed", self._tags[self._s_tag[r]],
                          self._s_created[r], self._s_attempts[r])  # fmt: skip

    def held_suggestions(self) -> Iterator[tuple[int, Suggestion]]:
        """(row, suggestion) for every suggestion a row holds, in row order."""
        self._settle()
        for r in range(self._n):
            s = self._whole_suggestions.get(r)
            if s is not None:
                yield r, s
            elif self._s_tag[r] != _NOT_HELD:
                yield r, self._held(r, str(self._sid[r]))

    def held_count(self) -> int:
        """How many suggestions the rows hold (a whole row's is counted once, in _whole_suggestions)."""
        self._settle()
        return len(self._whole_suggestions) + int(np.count_nonzero(np.frombuffer(self._s_tag, dtype=np.int32, count=self._n) != _NOT_HELD))

    def after(self, after: int) -> int:
        """The first row whose observation id is above `after` (ids grow with arrival)."""
        self._settle()
        lo, hi = 0, self._n
        while lo < hi:
            mid = (lo + hi) // 2
            o = self._whole.get(mid)
            oid = (int(o.id) if o.id.isdigit() else -1) if o is not None else self._oid[mid]
            if oid <= after:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _sort_hashes(self) -> None:
        self._sorted = np.sort(np.frombuffer(self._hash, dtype=np.int64, count=len(self._hash)))  # np.unique imports numpy.ma
        self._recent = set()

    def _spread_bits(self, size: int) -> None:
        """The filter at `size` bytes, set again from every row's hash."""
        hashes = np.concatenate([np.frombuffer(self._hash, dtype=np.int64, count=len(self._hash)),
                                 np.array([h for _, _, h in self._tail], dtype=np.int64)])  # fmt: skip
        bits = np.zeros(size, dtype=np.uint8)
        np.bitwise_or.at(bits, (hashes >> 3) & (size - 1), (1 << (hashes & 7)).astype(np.uint8))
        self._bits, self._bit_mask = bytearray(bits.tobytes()), size - 1

    def _has_hash(self, h: int) -> bool:
        if not self._bits[(h >> 3) & self._bit_mask] >> (h & 7) & 1:
            return False  # most points never seen end here, before the set and the search
        if h in self._recent:
            return True
        s = self._sorted
        i = int(s.searchsorted(h))
        return i < len(s) and int(s[i]) == h

    def settle(self) -> None:
        """After a load: every row in the columns, the hashes sorted, nothing left in the small set."""
        self._settle()
        self._sort_hashes()

    def observed(self, key: Key) -> bool:
        """Has a point with this dedup key been observed?"""
        h = hash(key)
        if not self._has_hash(h):
            return False
        self._settle()
        rows = np.flatnonzero(np.frombuffer(self._hash, dtype=np.int64, count=self._n) == h)
        return any(self._key(self.assignments(r)) == key for r in rows.tolist())

    def distinct_points(self) -> int:
        """Distinct observed points (by their keys' hashes)."""
        self._settle()
        self._sort_hashes()
        s = self._sorted
        return int(np.count_nonzero(s[1:] != s[:-1])) + 1 if len(s) else 0

    def objective_values(self) -> np.ndarray | None:
        """The first objective's value per row (nan: none or failed), or None when some row is kept whole."""
        self._settle()
        return self._objective_values(self._n)

    def _objective_values(self, n: int) -> np.ndarray | None:
        """objective_values over the first n rows, settled already. Reads copies of the
        columns (a slice of an array is one), never a view of them: a strategy on a worker
        thread may call this while the actor appends, and an array that exports its buffer
        to numpy cannot grow."""
        if any(r < n for r in list(self._whole)):
            return None
        values = np.frombuffer(self._value[:n], dtype=np.float64).copy()
        values[np.frombuffer(self._failed[:n], dtype=np.uint8).astype(bool)] = np.nan
        return values

    def best(self, sign: float) -> Observation | None | bool:
        """The observation with the lowest sign * value, not failed, the first of equals; None:
        there is none; False: some row is kept whole (ask `pareto.best_feasible`)."""
        self._settle()
        if self._whole:
            return False
        v = sign * np.frombuffer(self._value, dtype=np.float64, count=self._n)
        v[np.frombuffer(self._failed, dtype=np.uint8, count=self._n).astype(bool) | np.isnan(v)] = np.inf
        if not self._n or not np.isfinite(v).any():
            return None
        return self._row(int(np.argmin(v)))

    def view(self) -> "HistoryView":
        self._settle()
        return HistoryView(self, self._n)


class HistoryView(_Rows):
    """The history's first `n` rows as they are now (rows are only appended): what a
    strategy's request carries instead of a tuple of every observation."""

    __slots__ = ("_history", "_n")

    def __init__(self, history: History, n: int) -> None:
        self._history = history
        self._n = n

    def _rows_of(self) -> tuple[History, int]:
        return self._history, self._n

    def objective_values(self) -> np.ndarray | None:
        """The first objective's value per observation (nan: none), or None (read them from the objects)."""
        return self._history._objective_values(self._n)  # its rows were settled when the view was made


@dataclass(frozen=True)
class RowsLater:
    """A listing too long to make into objects on the actor's turn (it would hold the event
    loop): the rows as they are now, made into objects by the caller in a worker thread."""

    view: HistoryView
    start: int
    failed: bool | None
    limit: int | None

    def read(self) -> list[Observation]:
        return self.view.rows(self.start, self.failed, self.limit)
