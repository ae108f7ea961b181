"""The search space: validation, activity of conditional parameters, the unit
cube mapping the strategies sample in, grid enumeration, and the canonical key
used for dedup.

A Space is immutable and cheap to pickle, so it crosses into strategy worker
processes unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from typing import Any, Callable, Iterator, Mapping, Sequence

from ._numbers import PASS_FLOAT, plain_number, shown
from .errors import ApiError, invalid
from .limits import MAX_CONDITION_DEPTH, MAX_PARAMETERS, check_count
from .models import Parameter, Value, same_value
# the rules module itself, not the package: the package's typed models import the strategies, which import the space
from .schema._rules import parse_parameter

__all__ = ["Space", "Key", "is_large_space"]

Key = tuple  # canonical, hashable form of an assignment
_ENUMERATION_CAP = 200_000  # spaces with more discrete points are treated as unbounded


_LARGE_SPACE = 2_000  # parameters plus listed values over which parsing leaves the event loop


def is_large_space(raw: Any) -> bool:
    """Whether checking `raw` (a parameters list, unparsed) may take long enough to stall an
    event loop: a cheap count, no validation."""
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)):
        return False
    cost = len(raw)
    for p in raw:
        if cost > _LARGE_SPACE:
            return True
        if isinstance(p, Mapping):
            values = p.get("values")
            cost += len(values) if isinstance(values, Sequence) else 0
            conditions = p.get("conditions")
            cost += len(conditions) if isinstance(conditions, Sequence) else 0
    return cost > _LARGE_SPACE


_BOOL = "b"


def _token(v: Value) -> Any:
    """Hashable and equal exactly when same_value is: 1 and 1.0 are one token, True is not.
    Ints stay ints, so 2**62 and 2**62 + 1 stay apart (a float would merge them). A number
    or a string is its own token (the same object, so a key adds no copy of it; a string
    never equals a number); only a bool is wrapped, as True == 1."""
    t = type(v)
    if t is float or t is int or t is str:  # the usual values, by exact type (bool is not int here)
        return v
    if isinstance(v, bool):
        return (_BOOL, v)
    if isinstance(v, str):
        return str(v)
    return v if isinstance(v, int) else float(v)


def _last_step(p: Parameter) -> int:
    """k of the last value lo + k*step of an int or stepped parameter, by arithmetic
    (exact for ints, whatever the width of the range)."""
    lo, hi = p.bounds  # type: ignore[misc]
    if p.type == "int":
        return int((hi - lo) // (p.step or 1))
    return int(math.floor((hi - lo) / p.step + 1e-9))  # type: ignore[operator]


class _Steps(Sequence[Value]):
    """The values lo + k*step of an int or stepped parameter, computed on demand:
    a domain of 2**62 values costs nothing until a value is read."""

    def __init__(self, p: Parameter) -> None:
        self._p, self.n_values = p, _last_step(p) + 1

    def __len__(self) -> int:
        return self.n_values

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self.n_values))]
        if not -self.n_values <= k < self.n_values:
            raise IndexError(k)
        return _step_value(self._p, k % self.n_values)

    def __iter__(self) -> Iterator[Value]:
        k = 0
        while k < self.n_values:  # not range(): a count past sys.maxsize is fine here
            yield _step_value(self._p, k)
            k += 1


def _step_value(p: Parameter, k: int) -> Value:
    lo, hi = p.bounds  # type: ignore[misc]
    step = p.step if p.step is not None else 1
    if p.type == "int":
        return int(lo + k * step)
    return _grid_value(lo, hi, k, step)


def _count(domain: Sequence[Value]) -> int:
    return domain.n_values if isinstance(domain, _Steps) else len(domain)


def _grid_value(lo: float, hi: float, k: int, step: float) -> float:
    """lo + k*step, rounded to 12 decimals for readability when that stays in bounds."""
    v = lo + k * step
    r = round(v, 12)
    return min(max(r if lo <= r <= hi else v, lo), hi)


@dataclass(frozen=True)
class Space:
    parameters: tuple[Parameter, ...]

    @classmethod
    def parse(cls, raw: Sequence[Any]) -> "Space":
        if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Sequence):
            raise invalid("parameters: give a list of parameters")
        check_count("parameters", len(raw), MAX_PARAMETERS, "parameters")
        return cls(tuple(parse_parameter(p, i) for i, p in enumerate(raw)))

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the cached samplers (closures): a pooled strategy job sends
        the space to another process, which rebuilds them on first use."""
        return {k: v for k, v in self.__dict__.items() if k != "_dim_samplers"}

    def __post_init__(self) -> None:
        names: dict[str, Parameter] = {}
        for i, p in enumerate(self.parameters):
            if p.name in names:
                raise invalid(f"parameters[{i}].name: duplicate name {p.name!r}; names must be unique")
            names[p.name] = p
        for p in self.parameters:
            for c in p.conditions:
                parent = names.get(c.parent)
                if parent is None:
                    raise invalid(
                        f"parameter {p.name!r}: condition names unknown parent {c.parent!r}; "
                        f"known parameters are {sorted(names)}"
                    )
                if parent is p:
                    raise invalid(f"parameter {p.name!r}: a parameter cannot be its own condition parent")
                lookup = self._lookup.get(parent.name)
                for v in c.values:
                    if not _in_domain(parent, v, lookup):
                        raise invalid(
                            f"parameter {p.name!r}: condition value {v!r} is not a value "
                            f"parameter {parent.name!r} can take"
                        )
        self._check_depth()  # and self.order raises on cycles

    def _check_depth(self) -> None:
        """Refuse condition chains longer than MAX_CONDITION_DEPTH (parents come first in order)."""
        depth: dict[str, int] = {}
        for p in self.order:
            d = 1 + max((depth[c.parent] for c in p.conditions), default=0)
            if d > MAX_CONDITION_DEPTH:
                raise invalid(
                    f"parameter {p.name!r}: its chain of conditions is {d} parameters deep, over the limit "
                    f"of {MAX_CONDITION_DEPTH}; make the space flatter"
                )
            depth[p.name] = d

    # -- structure -------------------------------------------------------

    @cached_property
    def by_name(self) -> dict[str, Parameter]:
        return {p.name: p for p in self.parameters}

    @cached_property
    def _lookup(self) -> dict[str, dict[tuple[str, Any], Value]]:
        """Per categorical parameter: token -> declared value (the first of equal ones), so a
        value is found in O(1) rather than by scanning up to 10,000 values."""
        out: dict[str, dict[tuple[str, Any], Value]] = {}
        for p in self.parameters:
            if p.type == "categorical":
                index: dict[tuple[str, Any], Value] = {}
                for v in p.values or ():
                    index.setdefault(_token(v), v)
                out[p.name] = index
        return out

    @cached_property
    def order(self) -> tuple[Parameter, ...]:
        """Parents before children (declaration order otherwise). Depth first with an explicit
        stack: a chain of thousands of conditions must not exhaust Python's recursion limit."""
        done: dict[str, Parameter] = {}
        for root in self.parameters:
            if root.name in done:
                continue
            stack: list[tuple[Parameter, int]] = [(root, 0)]
            visiting = {root.name}
            while stack:
                p, k = stack[-1]
                if k == len(p.conditions):
                    stack.pop()
                    visiting.discard(p.name)
                    done[p.name] = p
                    continue
                stack[-1] = (p, k + 1)
                parent = self.by_name[p.conditions[k].parent]
                if parent.name in done:
                    continue
                if parent.name in visiting:
                    raise invalid(f"parameter {parent.name!r}: conditions form a cycle")
                visiting.add(parent.name)
                stack.append((parent, 0))
        return tuple(done.values())

    @cached_property
    def dims(self) -> tuple[Parameter, ...]:
        """Parameters that take a unit-cube coordinate (all but fixed), declaration order."""
        return tuple(p for p in self.parameters if p.type != "fixed")

    @cached_property
    def _condition_tokens(self) -> dict[str, tuple[frozenset[tuple[str, Any]], ...]]:
        """Per parameter, its conditions' values as token sets: activity is one hash lookup
        per condition (token equality is same_value's), not a scan of up to 10,000 values."""
        return {p.name: tuple(frozenset(_token(v) for v in c.values) for c in p.conditions) for p in self.parameters if p.conditions}

    def is_active(self, p: Parameter, assignments: Mapping[str, Value]) -> bool:
        if not p.conditions:
            return True
        for c, tokens in zip(p.conditions, self._condition_tokens[p.name]):
            if c.parent not in assignments or _token(assignments[c.parent]) not in tokens:
                return False
        return True

    # -- sampling --------------------------------------------------------

    @cached_property
    def _unconditional(self) -> bool:
        return not any(p.conditions for p in self.parameters)

    @cached_property
    def _dim_samplers(self) -> tuple[tuple[str, Callable[[float], Value]], ...] | None:
        """(name, value_at for that parameter) per dim, when every parameter is a dim
        and active (no fixed, no conditions): the inline ask's from_unit in one pass."""
        if not self._unconditional or len(self.dims) != len(self.parameters):
            return None
        return tuple((p.name, _sampler(p)) for p in self.parameters)

    def from_unit(self, u: Sequence[float]) -> dict[str, Value]:
        """Map a point of [0, 1)^len(dims) to an assignment (inactive parameters left out)."""
        samplers = self._dim_samplers
        if samplers is not None and len(u) == len(samplers):
            return {name: f(float(x)) for (name, f), x in zip(samplers, u)}
        if self._unconditional:  # every parameter active, declaration order: one pass
            coords = iter(u)
            return {p.name: value_at(p, 0.0 if p.type == "fixed" else float(next(coords, 0.0))) for p in self.parameters}
        coord = {p.name: float(x) for p, x in zip(self.dims, u)}
        out: dict[str, Value] = {}
        for p in self.order:
            if not self.is_active(p, out):
                continue
            out[p.name] = value_at(p, coord.get(p.name, 0.0))
        return {p.name: out[p.name] for p in self.parameters if p.name in out}

    # -- validation and keys ---------------------------------------------

    def validate(self, assignments: Any, field: str = "assignments") -> dict[str, Value]:
        """Check a user-given point; return it in canonical form (declared types, declaration order)."""
        if not isinstance(assignments, Mapping):
            raise invalid(f"{field}: give a dict of parameter name to value")
        unknown = sorted(set(assignments) - set(self.by_name))
        if unknown:
            raise invalid(f"{field}: unknown parameter(s) {unknown}; the space has {sorted(self.by_name)}")
        out: dict[str, Value] = {}
        for p in self.order:
            active = self.is_active(p, out)
            if p.name not in assignments:
                if active:
                    raise invalid(f"{field}: missing active parameter {p.name!r}")
                continue
            if not active:
                raise invalid(
                    f"{field}.{p.name}: parameter is inactive for these parent values "
                    f"({_describe_conditions(p)}); leave it out"
                )
            out[p.name] = _canonical(p, assignments[p.name], f"{field}.{p.name}", self._lookup.get(p.name))
        return {p.name: out[p.name] for p in self.parameters if p.name in out}

    def key(self, assignments: Mapping[str, Value]) -> Key:
        """(name, token, name, token, ...) by name: flat, so an experiment's dedup set holds
        one tuple per point that shares the point's own names and values."""
        return tuple(chain.from_iterable(sorted(zip(assignments, map(_token, assignments.values())))))

    # -- finite spaces ---------------------------------------------------

    def domain(self, p: Parameter, grid_size: int | None = None) -> Sequence[Value] | None:
        """The values p can take, or None when it is continuous and no grid size is given.
        Int and stepped domains are lazy sequences: their values are computed when read."""
        if p.type == "fixed":
            return [p.value]  # type: ignore[list-item]
        if p.type == "boolean":
            return [False, True]
        if p.type == "categorical":
            return list(p.values or ())
        if p.type == "int" or p.step is not None:
            return _Steps(p)
        if grid_size is None:
            return None
        return [value_at(p, k / (grid_size - 1) if grid_size > 1 else 0.0, closed=True) for k in range(grid_size)]

    def grid(self, grid_size: int | None = None) -> Iterator[dict[str, Value]]:
        """Every assignment of a finite space (continuous dims need grid_size), depth first in order."""
        domains = [self.domain(p, grid_size) for p in self.order]
        if any(d is None for d in domains):
            names = [p.name for p, d in zip(self.order, domains) if d is None]
            raise invalid(
                f"strategy grid: continuous parameter(s) {names} need a grid size; "
                "pass strategy_options={'grid_size': N} or give them a step"
            )
        return self._walk(domains)  # type: ignore[arg-type]

    def _walk(self, domains: list[Sequence[Value]]) -> Iterator[dict[str, Value]]:
        """Depth first over the domains in order, an inactive parameter taking no value. One
        iterator per level on an explicit stack: 10,000 parameters are 10,000 levels."""
        order, n = self.order, len(self.order)
        partial: dict[str, Value] = {}
        levels: list[Iterator[Any]] = []
        i = 0
        while i >= 0:
            if i == n:
                yield {p.name: partial[p.name] for p in self.parameters if p.name in partial}
                i -= 1
                continue
            p = order[i]
            if len(levels) == i:  # entering level i: its activity depends on the levels above
                levels.append(iter(domains[i]) if self.is_active(p, partial) else iter((_INACTIVE,)))
            v = next(levels[i], _DONE)
            if v is _DONE:
                levels.pop()
                partial.pop(p.name, None)
                i -= 1
                continue
            if v is not _INACTIVE:
                partial[p.name] = v  # type: ignore[assignment]
            i += 1

    def size(self, grid_size: int | None = None) -> int | None:
        """Number of distinct assignments, or None for continuous or very large spaces."""
        domains = [self.domain(p, grid_size) for p in self.order]
        if any(d is None for d in domains):
            return None
        bound = 1
        for d in domains:
            bound *= _count(d) + 1  # type: ignore[arg-type]
            if bound > _ENUMERATION_CAP * 4:
                return None
        return sum(1 for _ in self.grid(grid_size))

    @cached_property
    def finite_size(self) -> int | None:
        return self.size()


_INACTIVE, _DONE = object(), object()  # markers of Space._walk


def _in_domain(p: Parameter, v: Value, lookup: Mapping[tuple[str, Any], Value] | None = None) -> bool:
    try:
        _canonical(p, v, "", lookup)
        return True
    except ApiError:
        return False


def _describe_conditions(p: Parameter) -> str:
    return " and ".join(f"{c.parent} in {list(c.values)}" for c in p.conditions)


def _on_step(p: Parameter, x: float) -> bool:
    if p.step is None:
        return True
    lo = p.bounds[0]  # type: ignore[index]
    k = round((x - lo) / p.step)
    # tolerance for float error: relative to the step and to the magnitude of the values
    return abs(x - (lo + k * p.step)) <= max(1e-6 * p.step, 1e-12 * max(1.0, abs(x), abs(lo)))


def _canonical(p: Parameter, v: Any, where: str, lookup: Mapping[tuple[str, Any], Value] | None = None) -> Value:
    if p.type == "fixed":
        if same_value(v, p.value):  # type: ignore[arg-type]
            return p.value  # type: ignore[return-value]
        raise invalid(f"{where}: fixed parameter must be {p.value!r}, got {v!r}")
    if p.type == "boolean":
        if isinstance(v, bool):
            return v
        raise invalid(f"{where}: give true or false, got {v!r}")
    if p.type == "categorical":
        return _categorical(p, v, where, lookup)
    v = plain_number(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise invalid(f"{where}: give a number, got {shown(v)}; {PASS_FLOAT}")
    if isinstance(v, float) and not math.isfinite(v):
        raise invalid(f"{where}: {v!r} is not finite")
    lo, hi = p.bounds  # type: ignore[misc]
    if not lo <= v <= hi:  # exact for ints of any size: no float() of 10**400 here
        raise invalid(f"{where}: {v if isinstance(v, float) or v.bit_length() < 200 else 'a huge integer'} is outside bounds [{lo}, {hi}]")
    if p.type == "int":
        if isinstance(v, float) and not v.is_integer():
            raise invalid(f"{where}: an int parameter needs an integer, got {v!r}")
        v = int(v)
        if (v - lo) % (p.step or 1) != 0:
            raise invalid(f"{where}: {v} is not on the step grid {lo} + k*{p.step}")
        return v
    if not _on_step(p, float(v)):
        raise invalid(f"{where}: {v!r} is not on the step grid {lo} + k*{p.step}")
    return float(v)


def _categorical(p: Parameter, v: Any, where: str, lookup: Mapping[tuple[str, Any], Value] | None) -> Value:
    v = plain_number(v)  # numpy.int64(3) is the category 3
    if isinstance(v, (bool, str, int, float)):
        found = lookup.get(_token(v)) if lookup is not None else None
        if found is not None:
            return found
    if lookup is None:
        for w in p.values or ():
            if same_value(v, w):
                return w
    shown = list(p.values or ())
    listed = f"{shown[:20]} (and {len(shown) - 20} more)" if len(shown) > 20 else f"{shown}"
    raise invalid(f"{where}: {v!r} is not one of {listed}")


def _scaled(p: Parameter, u: float) -> float:
    lo, hi = p.bounds  # type: ignore[misc]
    if p.scale == "log":
        return math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    if p.scale == "reverse_log":
        return hi + lo - math.exp(math.log(lo) + (1.0 - u) * (math.log(hi) - math.log(lo)))
    return lo + u * (hi - lo)  # finite: parse_parameter refuses ranges whose hi - lo overflows


def _sampler(p: Parameter) -> Callable[[float], Value]:
    """value_at(p, .) with what depends on p alone worked out once; the same arithmetic
    in the same order, so the values are value_at's to the bit (a test compares them)."""
    if p.type == "categorical" and p.values:
        vals, n = p.values, len(p.values)
        return lambda u: vals[min(int(min(max(u, 0.0), 1.0) * n), n - 1)]
    if p.type == "double" and p.step is None and p.scale in ("linear", "log"):
        lo, hi = p.bounds  # type: ignore[misc]
        if p.scale == "log":
            log_lo, log_span = math.log(lo), math.log(hi) - math.log(lo)
            return lambda u: min(max(math.exp(log_lo + min(max(u, 0.0), 1.0) * log_span), lo), hi)
        span = hi - lo
        return lambda u: min(max(lo + min(max(u, 0.0), 1.0) * span, lo), hi)
    if p.type == "int" and p.scale == "linear":
        lo, kmax, step = p.bounds[0], _last_step(p), p.step if p.step is not None else 1  # type: ignore[index]
        return lambda u: int(lo + min(int(min(max(u, 0.0), 1.0) * (kmax + 1)), kmax) * step)
    return lambda u: value_at(p, u)


def value_at(p: Parameter, u: float, closed: bool = False) -> Value:
    """The value of p at unit coordinate u. Discrete domains are split into equal cells;
    continuous ones are scaled (log/reverse_log in log space) and snapped to the step."""
    u = min(max(u, 0.0), 1.0)
    if p.type == "fixed":
        return p.value  # type: ignore[return-value]
    if p.type == "boolean":
        return u >= 0.5
    if p.type == "categorical":
        vals = p.values or ()
        return vals[min(int(u * len(vals)), len(vals) - 1)]
    lo, hi = p.bounds  # type: ignore[misc]
    if p.type == "int" or p.step is not None:
        step = p.step if p.step is not None else 1
        kmax = _last_step(p)
        if p.scale == "linear":  # equal cells per grid value
            k = min(int(u * (kmax + 1)), kmax)
        else:
            k = min(max(round((_scaled(p, u) - lo) / step), 0), kmax)
        if p.type == "int":
            return int(lo + k * step)
        return _grid_value(lo, hi, k, step)
    return min(max(_scaled(p, u), lo), hi)
