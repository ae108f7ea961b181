"""Value objects users see: Parameter, Metric, Experiment, Suggestion, Observation.

All are frozen dataclasses. `to_dict()` gives the JSON wire form (used by the
HTTP door and the store); `from_dict()` reads it back, trusting it: it was checked
when it was made. User input is checked by the spec's rules (`tauopt.schema`),
which build these objects and raise `ApiError` `invalid_request` naming the field
and what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cache
from typing import Any, Iterable, Literal, Mapping, TypeVar, Union

__all__ = [
    "Value",
    "Condition",
    "Parameter",
    "Metric",
    "Constraint",
    "named_values",
    "with_values",
    "StrategyOptions",
    "Experiment",
    "Suggestion",
    "Observation",
    "Report",
    "ReportDecision",
    "PARAMETER_TYPES",
    "EXPERIMENT_STATES",
    "SUGGESTION_STATES",
]

Value = Union[str, int, float, bool]
ParameterType = Literal["double", "int", "categorical", "boolean", "fixed"]
Scale = Literal["linear", "log", "reverse_log"]

PARAMETER_TYPES = ("double", "int", "categorical", "boolean", "fixed")
SCALES = ("linear", "log", "reverse_log")
EXPERIMENT_STATES = ("active", "completed", "archived")
SUGGESTION_STATES = ("open", "observed", "closed", "expired")
OBJECTIVES = ("minimize", "maximize")


def same_value(a: Value, b: Value) -> bool:
    """Equality that keeps bool apart from int (True is not 1 here)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a == b


@dataclass(frozen=True)
class Condition:
    """Active only while parameter `parent` takes one of `values`."""

    parent: str
    values: tuple[Value, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"parent": self.parent, "values": list(self.values)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Condition":
        return cls(d["parent"], tuple(d["values"]))


@dataclass(frozen=True)
class Parameter:
    """One dimension of the search space.

    double: bounds (lo, hi), scale linear|log|reverse_log, optional step.
    int: bounds (lo, hi) inclusive, scale linear|log|reverse_log, optional step (default 1).
    categorical: values (ordered, str/int/float/bool).
    boolean: True/False.  fixed: one value.
    conditions: all must hold for the parameter to be active.
    """

    name: str
    type: ParameterType
    bounds: tuple[float, float] | None = None
    scale: Scale = "linear"
    step: float | int | None = None
    values: tuple[Value, ...] | None = None
    value: Value | None = None
    conditions: tuple[Condition, ...] = ()
    default: Value | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.bounds is not None:
            d["bounds"] = list(self.bounds)
        if self.scale != "linear":
            d["scale"] = self.scale
        if self.step is not None:
            d["step"] = self.step
        if self.values is not None:
            d["values"] = list(self.values)
        if self.type == "fixed":
            d["value"] = self.value
        if self.conditions:
            d["conditions"] = [c.to_dict() for c in self.conditions]
        if self.default is not None:
            d["default"] = self.default
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Parameter":
        bounds, values = d.get("bounds"), d.get("values")
        return cls(
            d["name"], d["type"], None if bounds is None else (bounds[0], bounds[1]), d.get("scale") or "linear",
            d.get("step"), None if values is None else tuple(values), d.get("value"),
            tuple(Condition.from_dict(c) for c in d.get("conditions") or ()), d.get("default"),
        )  # fmt: skip


MAX_OBJECTIVES = 4
MAX_CONSTRAINTS = 16
CONSTRAINT_OPS = ("<=", ">=")


@dataclass(frozen=True)
class Constraint:
    """A metric that must satisfy `value <op> bound` for an observation to be feasible."""

    op: Literal["<=", ">="]
    bound: float

    def satisfied(self, value: float) -> bool:
        return value <= self.bound if self.op == "<=" else value >= self.bound

    def violation(self, value: float) -> float:
        """How far past the bound (0 when satisfied): the GP models this, signed, per constraint."""
        return value - self.bound if self.op == "<=" else self.bound - value

    def to_dict(self) -> dict[str, float]:
        return {self.op: self.bound}

    @classmethod
    def from_dict(cls, d: Mapping[str, float]) -> "Constraint":
        ((op, bound),) = d.items()
        return cls(op, float(bound))  # type: ignore[arg-type]  # written by to_dict: "<=" or ">="


@dataclass(frozen=True)
class Metric:
    """An objective (`objective` set) or a constraint metric (`constraint` set,
    `objective` None): measured on every observation, must hold, not optimized."""

    name: str
    objective: Literal["minimize", "maximize"] | None = "minimize"
    constraint: Constraint | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.constraint is not None:
            return {"name": self.name, "constraint": self.constraint.to_dict()}
        return {"name": self.name, "objective": self.objective}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Metric":
        if d.get("constraint") is not None:
            return cls(d["name"], None, Constraint.from_dict(d["constraint"]))
        return cls(d["name"], d.get("objective", "minimize"))

    @property
    def sign(self) -> float:
        """+1 when smaller is better; multiply values by it to minimize."""
        return 1.0 if self.objective != "maximize" else -1.0


@dataclass(frozen=True)
class StrategyOptions:
    """Knobs of the strategies. `grid_size`: points per continuous dimension for
    `grid`; `initial_points`: Sobol points before the GP takes over under `auto`
    (default max(5, 2*d)); `seed`: makes an experiment's suggestions reproducible."""

    grid_size: int | None = None
    initial_points: int | None = None
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("grid_size", self.grid_size), ("initial_points", self.initial_points), ("seed", self.seed)) if v is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "StrategyOptions":
        return cls(**d) if d else cls()


@dataclass(frozen=True)
class Experiment:
    id: str
    name: str
    parameters: tuple[Parameter, ...]
    metric: Metric
    parallel_bandwidth: int = 1
    suggestion_ttl_s: float | None = None
    observation_budget: int | None = None
    strategy: str = "auto"
    state: Literal["active", "completed", "archived"] = "active"
    created_at: float = 0.0
    open_suggestions: int = 0
    observations: int = 0
    strategy_options: StrategyOptions = field(default_factory=StrategyOptions)
    owner: str | None = None
    # the stopping rule's JSON form ({"rule": "none"|"median"|"asha", ...}), checked
    # by tauopt.strategies.stopping.parse_rule before it gets here
    early_stopping: Mapping[str, Any] = field(default_factory=lambda: {"rule": "none"})
    # every metric, objectives first; `metric` is metrics[0]. Empty means (metric,):
    # experiments written before multi-objective (no "metrics" key) read that way.
    metrics: tuple[Metric, ...] = ()
    # The cap on consecutive failed runs (None: off), the failed runs in a row since
    # the last success or since the cap was last set, and why asks are refused once
    # the cap was reached (None while they are not). Stored with the experiment;
    # experiments written before the cap existed read as off, 0, None.
    max_consecutive_failures: int | None = None
    consecutive_failures: int = 0
    stopped_reason: str | None = None
    # free text for people (what the search is for); experiments written before it read as None
    description: str | None = None
    # labels for people and tools (key -> text, number or boolean); experiments written before it read as {}
    metadata: Mapping[str, Value] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.metrics:
            object.__setattr__(self, "metrics", (self.metric,))

    @property
    def objectives(self) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if m.objective is not None)

    @property
    def constraints(self) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if m.constraint is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "metadata": dict(self.metadata),
            "parameters": [p.to_dict() for p in self.parameters],
            "metric": self.metric.to_dict(),
            "metrics": [m.to_dict() for m in self.metrics],
            "parallel_bandwidth": self.parallel_bandwidth,
            "suggestion_ttl_s": self.suggestion_ttl_s,
            "observation_budget": self.observation_budget,
            "strategy": self.strategy,
            "strategy_options": self.strategy_options.to_dict(),
            "early_stopping": dict(self.early_stopping),
            "max_consecutive_failures": self.max_consecutive_failures,
            "consecutive_failures": self.consecutive_failures,
            "stopped_reason": self.stopped_reason,
            "state": self.state,
            "created_at": self.created_at,
            "open_suggestions": self.open_suggestions,
            "observations": self.observations,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], owner: str | None = None) -> "Experiment":
        return cls(
            id=d["id"],
            name=d["name"],
            parameters=tuple(Parameter.from_dict(p) for p in d["parameters"]),
            metric=Metric.from_dict(d["metric"]),
            metrics=tuple(Metric.from_dict(x) for x in d.get("metrics") or ()),
            parallel_bandwidth=int(d["parallel_bandwidth"]),
            suggestion_ttl_s=d.get("suggestion_ttl_s"),
            observation_budget=d.get("observation_budget"),
            strategy=d.get("strategy", "auto"),
            state=d.get("state", "active"),
            created_at=float(d.get("created_at", 0.0)),
            open_suggestions=int(d.get("open_suggestions", 0)),
            observations=int(d.get("observations", 0)),
            strategy_options=StrategyOptions.from_dict(d.get("strategy_options")),
            owner=owner if owner is not None else d.get("owner"),
            early_stopping=dict(d.get("early_stopping") or {"rule": "none"}),
            max_consecutive_failures=d.get("max_consecutive_failures"),
            consecutive_failures=int(d.get("consecutive_failures", 0)),
            stopped_reason=d.get("stopped_reason"),
            description=d.get("description"),
            metadata=dict(d.get("metadata") or {}),
        )

    def evolve(self, **changes: Any) -> "Experiment":
        if "metric" in changes or "metrics" in changes:
            return replace(self, **changes)  # __post_init__ derives metrics from metric
        return _evolved(self, changes)


# Suggestion and Observation write their __init__ out (a dataclass keeps an __init__
# its class defines): the generated one of a frozen dataclass runs a generic
# __setattr__ call a field. These set each field with object.__setattr__ directly and
# never touch the instance's __dict__: an instance whose dict is never asked for keeps
# its fields as inline values (~150 bytes for 8 fields, against ~330 once a dict is
# made), and an experiment holds one of each per observation. `evolve` and pickling
# (`__reduce__`) copy field by field for the same reason. The classes stay frozen
# (assigning a field still raises), and tests/test_models_evolve.py pins that each
# __init__ takes the fields, in order, with their defaults.
_FRESH_DICT: Any = object()  # the default of a dict field: a new {} each time, like field(default_factory=dict)
_set = object.__setattr__


@dataclass(frozen=True)
class Suggestion:
    id: str
    experiment_id: str
    assignments: dict[str, Value]
    state: Literal["open", "observed", "closed", "expired"] = "open"
    tag: str | None = None
    created_at: float = 0.0  # when it was (last) handed out: its TTL counts from here
    # Leases: how many times it was handed out, and whether its holder was declared
    # dead (it then goes to the next ask, same id). Not on the wire yet.
    attempts: int = 1
    released: bool = False

    def __init__(
        self,
        id: str,
        experiment_id: str,
        assignments: dict[str, Value],
        state: Literal["open", "observed", "closed", "expired"] = "open",
        tag: str | None = None,
        created_at: float = 0.0,
        attempts: int = 1,
        released: bool = False,
    ) -> None:
        # written out (see _FRESH_DICT): the fields above, in order, with their defaults
        _set(self, "id", id); _set(self, "experiment_id", experiment_id); _set(self, "assignments", assignments)
        _set(self, "state", state); _set(self, "tag", tag); _set(self, "created_at", created_at)
        _set(self, "attempts", attempts); _set(self, "released", released)  # fmt: skip

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return Suggestion, (self.id, self.experiment_id, self.assignments, self.state, self.tag, self.created_at,
                            self.attempts, self.released)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "experiment_id": self.experiment_id,
            "assignments": dict(self.assignments),
            "state": self.state,
            "tag": self.tag,
            "created_at": self.created_at,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Suggestion":
        return cls(
            id=str(d["id"]),
            experiment_id=d["experiment_id"],
            assignments=dict(d["assignments"]),
            state=d.get("state", "open"),
            tag=d.get("tag"),
            created_at=float(d.get("created_at", 0.0)),
        )

    def evolve(self, **changes: Any) -> "Suggestion":
        return _evolved(self, changes)


@dataclass(frozen=True)
class Observation:
    """`value` is the (first) objective metric (finite), or None with `failed=True`.
    `metrics` keeps any other metrics reported with it; `values` has every metric
    it carries by name, the first objective included (`named_values`), so code
    that reads each declared metric by name reads `o.values[name]`."""

    id: str
    experiment_id: str
    suggestion_id: str | None
    assignments: dict[str, Value]
    value: float | None = None
    failed: bool = False
    created_at: float = 0.0
    metrics: dict[str, float] = field(default_factory=dict)
    # observed with stopped=True: the last step the trial reported before it stopped
    stopped_at_step: int | None = None
    values: dict[str, float] = field(default_factory=dict)

    def __init__(
        self,
        id: str,
        experiment_id: str,
        suggestion_id: str | None,
        assignments: dict[str, Value],
        value: float | None = None,
        failed: bool = False,
        created_at: float = 0.0,
        metrics: dict[str, float] = _FRESH_DICT,
        stopped_at_step: int | None = None,
        values: dict[str, float] = _FRESH_DICT,
    ) -> None:
        # written out (see _FRESH_DICT): the fields above, in order, with their defaults
        _set(self, "id", id); _set(self, "experiment_id", experiment_id); _set(self, "suggestion_id", suggestion_id)
        _set(self, "assignments", assignments); _set(self, "value", value); _set(self, "failed", failed)
        _set(self, "created_at", created_at); _set(self, "metrics", {} if metrics is _FRESH_DICT else metrics)
        _set(self, "stopped_at_step", stopped_at_step); _set(self, "values", {} if values is _FRESH_DICT else values)  # fmt: skip

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return Observation, (self.id, self.experiment_id, self.suggestion_id, self.assignments, self.value, self.failed,
                             self.created_at, self.metrics, self.stopped_at_step, self.values)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "experiment_id": self.experiment_id,
            "suggestion_id": self.suggestion_id,
            "assignments": dict(self.assignments),
            "value": self.value,
            "failed": self.failed,
            "created_at": self.created_at,
            "metrics": dict(self.metrics),
            "stopped_at_step": self.stopped_at_step,
            "values": dict(self.values),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Observation":
        return cls(
            id=str(d["id"]),
            experiment_id=d["experiment_id"],
            suggestion_id=None if d.get("suggestion_id") is None else str(d["suggestion_id"]),
            assignments=dict(d["assignments"]),
            value=None if d.get("value") is None else float(d["value"]),
            failed=bool(d.get("failed", False)),
            created_at=float(d.get("created_at", 0.0)),
            metrics={k: float(v) for k, v in (d.get("metrics") or {}).items()},
            stopped_at_step=None if d.get("stopped_at_step") is None else int(d["stopped_at_step"]),
            values={k: float(v) for k, v in (d.get("values") or {}).items()},
        )


def named_values(primary: str, value: float | None, metrics: Mapping[str, float]) -> dict[str, float]:
    """Every metric of an observation by name: the first objective (`primary`, stored
    as `value`) first, then the other metrics it carries."""
    out = {} if value is None else {primary: value}
    out.update((k, v) for k, v in metrics.items() if k != primary)
    return out


def with_values(primary: str, observations: Iterable[Observation]) -> list[Observation]:
    """`observations` with their `values` filled in: a store keeps `value` and `metrics`,
    and `values` is theirs under the first objective's name."""
    return [
        o if o.values or (o.value is None and not o.metrics) else _evolved(o, {"values": named_values(primary, o.value, o.metrics)})
        for o in observations
    ]


@dataclass(frozen=True)
class Report:
    """An intermediate value of the objective at `step` for an open suggestion."""

    suggestion_id: str
    step: int
    value: float
    created_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"suggestion_id": self.suggestion_id, "step": self.step, "value": self.value, "created_at": self.created_at}


@dataclass(frozen=True)
class ReportDecision:
    """The answer to a report: stop the trial (with the rule's reason) or go on."""

    should_stop: bool
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"should_stop": self.should_stop, "reason": self.reason}


_D = TypeVar("_D")


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def _evolved(obj: _D, changes: Mapping[str, Any]) -> _D:
    """A copy of a frozen dataclass with `changes` applied, like `dataclasses.replace`
    but without re-running __init__ field by field: ~1 µs instead of ~20 µs on an
    Experiment, and the engine evolves one on every commit. Only for fields that no
    __post_init__ derives from (the callers above route those to `replace`)."""
    cls: type = type(obj)  # mypy does not see type[_D] as Hashable (the cache key)
    if not changes.keys() <= _field_names(cls):
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(changes.keys() - _field_names(cls))}")
    new: _D = object.__new__(cls)
    if cls is Suggestion or cls is Observation:  # field by field: their instances keep no dict (see _FRESH_DICT)
        for name in _field_order(cls):
            _set(new, name, changes[name] if name in changes else getattr(obj, name))
    else:
        new.__dict__.update(obj.__dict__, **changes)
    return new


@cache
def _field_order(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))
