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
from typing import Any, Iterator, Mapping, Sequence

from .errors import invalid
from .models import Parameter, Value, same_value

__all__ = ["Space", "Key"]

Key = tuple  # canonical, hashable form of an assignment
_ENUMERATION_CAP = 200_000  # spaces with more discrete points are treated as unbounded


def _token(v: Value) -> tuple[str, Any]:
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, str):
        return ("s", v)
    return ("n", float(v))


def _stepped_values(p: Parameter) -> list[Value]:
    lo, hi = p.bounds  # type: ignore[misc]
    step = p.step if p.step is not None else 1
    n = int(math.floor((hi - lo) / step + 1e-9)) + 1
    if p.type == "int":
        return [int(lo + k * step) for k in range(n)]
    return [_grid_value(lo, hi, k, step) for k in range(n)]


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
        return cls(tuple(Parameter.parse(p, i) for i, p in enumerate(raw)))

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
                for v in c.values:
                    if not _in_domain(parent, v):
                        raise invalid(
                            f"parameter {p.name!r}: condition value {v!r} is not a value "
                            f"parameter {parent.name!r} can take"
                        )
        self.order  # raises on cycles

    # -- structure -------------------------------------------------------

    @cached_property
    def by_name(self) -> dict[str, Parameter]:
        return {p.name: p for p in self.parameters}

    @cached_property
    def order(self) -> tuple[Parameter, ...]:
        """Parents before children (declaration order otherwise)."""
        done: dict[str, Parameter] = {}
        visiting: set[str] = set()

        def visit(p: Parameter) -> None:
            if p.name in done:
                return
            if p.name in visiting:
                raise invalid(f"parameter {p.name!r}: conditions form a cycle")
            visiting.add(p.name)
            for c in p.conditions:
                visit(self.by_name[c.parent])
            visiting.discard(p.name)
            done[p.name] = p

        for p in self.parameters:
            visit(p)
        return tuple(done.values())

    @cached_property
    def dims(self) -> tuple[Parameter, ...]:
        """Parameters that take a unit-cube coordinate (all but fixed), declaration order."""
        return tuple(p for p in self.parameters if p.type != "fixed")

    def is_active(self, p: Parameter, assignments: Mapping[str, Value]) -> bool:
        for c in p.conditions:
            if c.parent not in assignments:
                return False
            if not any(same_value(assignments[c.parent], v) for v in c.values):
                return False
        return True

    # -- sampling --------------------------------------------------------

    def from_unit(self, u: Sequence[float]) -> dict[str, Value]:
        """Map a point of [0, 1)^len(dims) to an assignment (inactive parameters left out)."""
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
            out[p.name] = _canonical(p, assignments[p.name], f"{field}.{p.name}")
        return {p.name: out[p.name] for p in self.parameters if p.name in out}

    def key(self, assignments: Mapping[str, Value]) -> Key:
        return tuple(sorted((k, _token(v)) for k, v in assignments.items()))

    # -- finite spaces ---------------------------------------------------

    def domain(self, p: Parameter, grid_size: int | None = None) -> list[Value] | None:
        """The values p can take, or None when it is continuous and no grid size is given."""
        if p.type == "fixed":
            return [p.value]  # type: ignore[list-item]
        if p.type == "boolean":
            return [False, True]
        if p.type == "categorical":
            return list(p.values or ())
        if p.type == "int" or p.step is not None:
            return _stepped_values(p)
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
        order = self.order

        def walk(i: int, partial: dict[str, Value]) -> Iterator[dict[str, Value]]:
            if i == len(order):
                yield {p.name: partial[p.name] for p in self.parameters if p.name in partial}
                return
            p = order[i]
            if not self.is_active(p, partial):
                yield from walk(i + 1, partial)
                return
            for v in domains[i]:  # type: ignore[union-attr]
                partial[p.name] = v
                yield from walk(i + 1, partial)
            del partial[p.name]

        return walk(0, {})

    def size(self, grid_size: int | None = None) -> int | None:
        """Number of distinct assignments, or None for continuous or very large spaces."""
        domains = [self.domain(p, grid_size) for p in self.order]
        if any(d is None for d in domains):
            return None
        bound = 1
        for d in domains:
            bound *= len(d) + 1  # type: ignore[arg-type]
            if bound > _ENUMERATION_CAP * 4:
                return None
        return sum(1 for _ in self.grid(grid_size))

    @cached_property
    def finite_size(self) -> int | None:
        return self.size()


def _in_domain(p: Parameter, v: Value) -> bool:
    try:
        _canonical(p, v, "")
        return True
    except Exception:
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


def _canonical(p: Parameter, v: Any, where: str) -> Value:
    if p.type == "fixed":
        if same_value(v, p.value):  # type: ignore[arg-type]
            return p.value  # type: ignore[return-value]
        raise invalid(f"{where}: fixed parameter must be {p.value!r}, got {v!r}")
    if p.type == "boolean":
        if isinstance(v, bool):
            return v
        raise invalid(f"{where}: give true or false, got {v!r}")
    if p.type == "categorical":
        for w in p.values or ():
            if same_value(v, w):
                return w
        raise invalid(f"{where}: {v!r} is not one of {list(p.values or ())}")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise invalid(f"{where}: give a number, got {v!r}")
    if not math.isfinite(v):
        raise invalid(f"{where}: {v!r} is not finite")
    lo, hi = p.bounds  # type: ignore[misc]
    if not lo <= v <= hi:
        raise invalid(f"{where}: {v!r} is outside bounds [{lo}, {hi}]")
    if p.type == "int":
        if float(v) != int(v):
            raise invalid(f"{where}: an int parameter needs an integer, got {v!r}")
        v = int(v)
        if (v - lo) % (p.step or 1) != 0:
            raise invalid(f"{where}: {v} is not on the step grid {lo} + k*{p.step}")
        return v
    if not _on_step(p, float(v)):
        raise invalid(f"{where}: {v!r} is not on the step grid {lo} + k*{p.step}")
    return float(v)


def _scaled(p: Parameter, u: float) -> float:
    lo, hi = p.bounds  # type: ignore[misc]
    if p.scale == "log":
        return math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    if p.scale == "reverse_log":
        return hi + lo - math.exp(math.log(lo) + (1.0 - u) * (math.log(hi) - math.log(lo)))
    return lo + u * (hi - lo)


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
        kmax = int(math.floor((hi - lo) / step + 1e-9))
        if p.scale == "linear":  # equal cells per grid value
            k = min(int(u * (kmax + 1)), kmax)
        else:
            k = min(max(round((_scaled(p, u) - lo) / step), 0), kmax)
        if p.type == "int":
            return int(lo + k * step)
        return _grid_value(lo, hi, k, step)
    return min(max(_scaled(p, u), lo), hi)
