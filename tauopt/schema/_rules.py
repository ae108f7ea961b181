"""The rules of the experiment spec and of every request, with the messages users read:
one function per shape, each raising ApiError `invalid_request` that names the field and
says what to give. They return the engine's value objects (`tauopt.models`).

The typed models of `tauopt.schema` validate with these functions (the create body's
fields name them), so the engine, the REST door and the other doors refuse a bad value
with the same message; the models' field types are what /openapi.json states. Pure
Python, no pydantic: the worker loop's calls (ask, observe, report) run them directly.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeGuard

from .._numbers import PASS_FLOAT, integral, plain_number
from .._numbers import shown as _shown
from ..errors import ApiError, api_error, invalid
from ..limits import (
    COUNT,
    MAX_CATEGORICAL_VALUES,
    MAX_CONDITIONS,
    MAX_DESCRIPTION_CHARS,
    MAX_METADATA_KEYS,
    MAX_METRICS,
    MAX_NAME_CHARS,
    MAX_TEXT_VALUE_CHARS,
    METADATA_KEY_CHARS,
    POSITIVE_SECONDS,
    REPORT_STEP,
    STRATEGY_OPTIONS,
    TAG_CHARS,
    as_float,
    check_count,
    check_int64,
    check_text,
    check_wait,
)
from ..models import (
    CONSTRAINT_OPS,
    MAX_CONSTRAINTS,
    MAX_OBJECTIVES,
    OBJECTIVES,
    PARAMETER_TYPES,
    SCALES,
    Condition,
    Constraint,
    Experiment,
    Metric,
    Parameter,
    Scale,
    StrategyOptions,
    Value,
    same_value,
)
from ._stopping import parse_rule, rule_to_json

__all__ = [
    "parse_parameter", "parse_condition", "parse_metric", "parse_constraint", "parse_metrics", "parse_strategy_options",
    "check_name", "check_description", "check_metadata", "check_tag", "check_bandwidth", "check_ttl", "check_budget", "check_max_failures",
    "check_strategy", "check_early_stopping", "check_update", "check_wait", "check_value_and_metrics", "check_observation",
    "check_report", "UPDATABLE", "spec_given", "invalid_fields",
]

UPDATABLE = (
    "name", "parallel_bandwidth", "suggestion_ttl_s", "observation_budget", "parameters", "early_stopping",
    "max_consecutive_failures", "description", "metadata",
)  # fmt: skip
_PARAM_KEYS = ("name", "type", "bounds", "scale", "step", "values", "value", "conditions", "default")


def _is_scale(v: object) -> TypeGuard[Scale]:
    return v in SCALES


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _finite(where: str, v: int | float) -> bool:
    return math.isfinite(as_float(where, v))


def _check_value(where: str, v: Any) -> Value:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        return check_text(where, v, MAX_TEXT_VALUE_CHARS)
    if isinstance(v, int):
        return check_int64(where, v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise invalid(f"{where}: {v!r} is not finite; use a finite number")
        return v
    raise invalid(f"{where}: {v!r} is a {type(v).__name__}; use a str, int, float or bool")


def _values(where: str, values: Any) -> tuple[Value, ...]:
    """A non-empty list of values, at most MAX_CATEGORICAL_VALUES (counted before any is checked)."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise invalid(f"{where}: give a non-empty list of values")
    values = tuple(values)
    check_count(where, len(values), MAX_CATEGORICAL_VALUES, "values")
    vals = tuple(_check_value(where, v) for v in values)
    if not vals:
        raise invalid(f"{where}: give a non-empty list of values")
    return vals


def _unknown_keys(where: str, given: Mapping[str, Any], allowed: Iterable[str]) -> None:
    extra = sorted(set(given) - set(allowed))
    if extra:
        raise invalid(f"{where}: unknown key(s) {extra}; allowed keys are {sorted(allowed)}")


def parse_condition(where: str, raw: Any) -> Condition:
    """A condition from a dict {parent, values} (or a Condition as it is)."""
    if isinstance(raw, Condition):
        return raw
    if not isinstance(raw, Mapping):
        raise invalid(f"{where}: a condition is a dict {{'parent': NAME, 'values': [...]}}")
    _unknown_keys(where, raw, ("parent", "values"))
    parent = raw.get("parent")
    if not isinstance(parent, str) or not parent:
        raise invalid(f"{where}.parent: give the name of the parent parameter")
    return Condition(check_text(f"{where}.parent", parent), _values(f"{where}.values", raw.get("values")))


def parse_parameter(raw: Any, index: int = 0) -> Parameter:
    """A parameter from its dict (or a Parameter, checked again), every rule of its type checked;
    `index` names it in messages (parameters[index])."""
    if isinstance(raw, Parameter):
        raw = raw.to_dict()
    where = f"parameters[{index}]"
    if not isinstance(raw, Mapping):
        raise invalid(f"{where}: a parameter is a dict or a tauopt.Parameter, not {type(raw).__name__}")
    _unknown_keys(where, raw, _PARAM_KEYS)
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise invalid(f"{where}.name: give a non-empty string name")
    check_text(f"{where}.name", name)
    where = f"parameters[{index}] ({name!r})"
    ptype = raw.get("type")
    if ptype not in PARAMETER_TYPES:
        raise invalid(f"{where}.type: {ptype!r} is not one of {list(PARAMETER_TYPES)}")
    conditions = raw.get("conditions")  # null is none; "" or 0 is not a list (as /openapi.json says)
    if conditions is None:
        conditions = ()
    if isinstance(conditions, Mapping):
        conditions = (conditions,)
    if isinstance(conditions, (str, bytes)) or not isinstance(conditions, Iterable):
        raise invalid(f"{where}.conditions: give a list of conditions")
    conditions = tuple(conditions)
    check_count(f"{where}.conditions", len(conditions), MAX_CONDITIONS, "conditions")
    conds = tuple(parse_condition(f"{where}.conditions[{i}]", c) for i, c in enumerate(conditions))
    scale = raw.get("scale")
    if scale is None:  # null is linear; "" or false is not a scale (as /openapi.json says)
        scale = "linear"
    if not _is_scale(scale):
        raise invalid(f"{where}.scale: {scale!r} is not one of {list(SCALES)}")
    default = raw.get("default")
    if default is not None:
        default = _check_value(f"{where}.default", default)

    def forbid(*keys: str) -> None:
        for k in keys:
            if raw.get(k) is not None and not (k == "scale" and raw.get(k) == "linear"):
                raise invalid(f"{where}.{k}: not used by a {ptype} parameter; remove it")

    if ptype in ("double", "int"):
        forbid("values", "value")
        raw_bounds = raw.get("bounds")
        if isinstance(raw_bounds, (str, bytes, Mapping)) or not isinstance(raw_bounds, Iterable):
            raise invalid(f"{where}.bounds: give [lo, hi]")
        bounds = tuple(raw_bounds)
        if len(bounds) != 2:
            raise invalid(f"{where}.bounds: give [lo, hi]")
        if not all(_is_number(b) for b in bounds):
            raise invalid(f"{where}.bounds: both bounds must be numbers, got {list(bounds)}")
        lo, hi = bounds
        if ptype == "int":  # before any float(): 10**400 is an int too wide, not a float overflow
            for bound in bounds:
                if isinstance(bound, int):
                    check_int64(f"{where}.bounds", bound)
        if not (_finite(f"{where}.bounds", lo) and _finite(f"{where}.bounds", hi)):
            raise invalid(f"{where}.bounds: bounds must be finite, got {list(bounds)}")
        if ptype == "int":
            if not all(isinstance(b, int) or b.is_integer() for b in bounds):
                raise invalid(f"{where}.bounds: an int parameter needs integer bounds, got {list(bounds)}")
            lo, hi = check_int64(f"{where}.bounds", int(lo)), check_int64(f"{where}.bounds", int(hi))
        else:
            lo, hi = float(lo), float(hi)
            if not math.isfinite(hi - lo):
                raise invalid(
                    f"{where}.bounds: hi - lo = {hi} - {lo} overflows a 64-bit float; "
                    "narrow the range (hi - lo must be below about 1.8e308)"
                )
        if lo >= hi:
            raise invalid(f"{where}.bounds: lo must be < hi, got lo={lo} hi={hi}")
        if scale != "linear" and lo <= 0:
            raise invalid(f"{where}.scale: {scale} scale needs lo > 0, got lo={lo}")
        step = raw.get("step")
        if step is not None:
            if not _is_number(step) or not _finite(f"{where}.step", step) or step <= 0:
                raise invalid(f"{where}.step: give a positive number, got {step!r}")
            if ptype == "int":
                if float(step) != int(step):
                    raise invalid(f"{where}.step: an int parameter needs an integer step, got {step!r}")
                step = int(step)
            else:
                step = float(step)
            if step > hi - lo:
                raise invalid(f"{where}.step: step {step} is larger than hi - lo = {hi - lo}")
            if ptype == "double" and (hi - lo) / step > 2.0**63:
                raise invalid(f"{where}.step: {step} splits [{lo}, {hi}] into more than 2**63 steps; use a larger step")
        if default is not None and not (_is_number(default) and lo <= default <= hi):
            raise invalid(f"{where}.default: {default!r} is outside bounds [{lo}, {hi}]")
        return Parameter(name, ptype, (lo, hi), scale, step, None, None, conds, default)
    if ptype == "categorical":
        forbid("bounds", "scale", "step", "value")
        vals = _values(f"{where}.values", raw.get("values"))
        # a duplicate is the same type and equal (1 and 1.0 may both appear): hashing
        # (type, value) finds it in O(n)
        seen: set[tuple[type, Value]] = set()
        for v in vals:
            if (type(v), v) in seen:
                raise invalid(f"{where}.values: duplicate value {v!r}; each value must appear once")
            seen.add((type(v), v))
        if default is not None and not any(same_value(default, v) for v in vals):
            raise invalid(f"{where}.default: {default!r} is not one of the values")
        return Parameter(name, ptype, None, "linear", None, vals, None, conds, default)
    if ptype == "boolean":
        forbid("bounds", "scale", "step", "values", "value")
        if default is not None and not isinstance(default, bool):
            raise invalid(f"{where}.default: a boolean default must be true or false")
        return Parameter(name, ptype, None, "linear", None, None, None, conds, default)
    # fixed
    forbid("bounds", "scale", "step", "values")
    if "value" not in raw or raw["value"] is None:
        raise invalid(f"{where}.value: a fixed parameter needs its value")
    value = _check_value(f"{where}.value", raw["value"])
    return Parameter(name, ptype, None, "linear", None, None, value, conds, None)


def parse_constraint(where: str, raw: Any) -> Constraint:
    """A constraint from {'<=': bound} or {'>=': bound} (or a Constraint as it is)."""
    if isinstance(raw, Constraint):
        return raw
    if not isinstance(raw, Mapping) or len(raw) != 1 or next(iter(raw)) not in CONSTRAINT_OPS:
        raise invalid(f"{where}: give exactly one bound, {{'<=': number}} or {{'>=': number}}, got {raw!r}")
    op, bound = next(iter(raw.items()))
    if not _is_number(bound) or not _finite(where, bound):
        raise invalid(f"{where}: the bound must be a finite number, got {bound!r}")
    return Constraint(op, float(bound))


def parse_metric(raw: Any, where: str = "metric", default_objective: str | None = "minimize") -> Metric:
    """An objective or a constraint metric from its dict (or a Metric as it is)."""
    if isinstance(raw, Metric):
        return raw
    if not isinstance(raw, Mapping):
        raise invalid(f"{where}: give {{'name': ..., 'objective': 'minimize' | 'maximize'}}")
    _unknown_keys(where, raw, ("name", "objective", "constraint"))
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise invalid(f"{where}.name: give a non-empty string name")
    check_text(f"{where}.name", name)
    if raw.get("constraint") is not None:
        if raw.get("objective") is not None:
            raise invalid(f"{where} ({name!r}): a metric is an objective or a constraint, not both; give one of them")
        return Metric(name, None, parse_constraint(f"{where}.constraint ({name!r})", raw["constraint"]))
    objective = raw.get("objective", default_objective)
    if objective is None:
        raise invalid(f"{where} ({name!r}): give 'objective': 'minimize' | 'maximize' or 'constraint': {{'<=': number}}")
    if objective not in OBJECTIVES:
        raise invalid(f"{where}.objective: {objective!r} is not one of {list(OBJECTIVES)}")
    return Metric(name, objective)


def parse_metrics(metric: Any = None, metrics: Any = None) -> tuple[Metric, ...]:
    """An experiment's metrics from `metric=` (one objective, today's form) or
    `metrics=[...]` (1-4 objectives and any constraint metrics); objectives first,
    in the order given, so the first objective is `Experiment.metric`."""
    if metric is not None and metrics is not None:
        raise invalid("give metric= (one objective) or metrics=[...], not both")
    if metrics is None:
        if metric is None:
            raise invalid("metrics: give metric={'name': ..., 'objective': ...} or metrics=[...]")
        return (parse_metric(metric),)
    if isinstance(metrics, (str, bytes, Mapping)) or not isinstance(metrics, Iterable):
        raise invalid("metrics: give a list of {'name', 'objective'} or {'name', 'constraint'} dicts")
    metrics = tuple(metrics)
    check_count("metrics", len(metrics), MAX_OBJECTIVES + MAX_CONSTRAINTS, "metrics")
    # an entry with neither objective nor constraint is an objective to minimize, as in metric=
    parsed = tuple(parse_metric(m, f"metrics[{i}]") for i, m in enumerate(metrics))
    seen: set[str] = set()
    for i, m in enumerate(parsed):
        if m.name in seen:
            raise invalid(f"metrics[{i}].name: {m.name!r} appears twice; each metric name must be unique")
        seen.add(m.name)
    objectives = tuple(m for m in parsed if m.objective is not None)
    constraints = tuple(m for m in parsed if m.constraint is not None)
    if not objectives:
        raise invalid("metrics: give at least one objective ({'name': ..., 'objective': 'minimize' | 'maximize'})")
    if len(objectives) > MAX_OBJECTIVES:
        raise invalid(f"metrics: {len(objectives)} objectives; at most {MAX_OBJECTIVES} (make the others constraints)")
    if len(constraints) > MAX_CONSTRAINTS:
        raise invalid(f"metrics: {len(constraints)} constraint metrics; at most {MAX_CONSTRAINTS}")
    return objectives + constraints


def parse_strategy_options(raw: Any) -> StrategyOptions:
    """The strategy options from a dict (None: the defaults)."""
    if raw is None:
        return StrategyOptions()
    if isinstance(raw, StrategyOptions):
        return raw
    if not isinstance(raw, Mapping):
        raise invalid("strategy_options: give a dict with grid_size, initial_points or seed")
    _unknown_keys("strategy_options", raw, ("grid_size", "initial_points", "seed"))
    out = {}
    for key, limit in STRATEGY_OPTIONS.items():
        v = integral(raw.get(key))
        if v is None:
            continue
        if not isinstance(v, int) or v not in limit:
            raise invalid(f"strategy_options.{key}: give an integer >= {limit.ge}, got {v!r}")
        out[key] = v
    return StrategyOptions(**out)


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise invalid("name: give a non-empty string")
    if len(name) > MAX_NAME_CHARS:
        raise invalid(f"name: at most {MAX_NAME_CHARS} characters")
    return check_text("name", name)


def check_description(description: Any) -> str | None:
    if description is None:
        return None
    if not isinstance(description, str):
        raise invalid(f"description: give a string (or null for none), got {type(description).__name__}")
    return check_text("description", description, MAX_DESCRIPTION_CHARS)


def check_metadata(metadata: Any) -> dict[str, Value]:
    """An experiment's metadata: at most MAX_METADATA_KEYS keys of 1-128 characters, each
    naming a text (at most 1,024 characters), a signed 64-bit integer, a finite number or
    a boolean; null is none (an empty dict)."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise invalid(f"metadata: give an object of key to text, number or boolean, got {type(metadata).__name__}")
    check_count("metadata", len(metadata), MAX_METADATA_KEYS, "keys")
    out: dict[str, Value] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or len(key) not in METADATA_KEY_CHARS:
            raise invalid(f"metadata: a key is {METADATA_KEY_CHARS.ge}-{METADATA_KEY_CHARS.le} characters, got {key!r}")
        check_text("metadata key", key, int(METADATA_KEY_CHARS.le or 0))
        out[key] = _check_value(f"metadata[{key!r}]", plain_number(value))
    return out


# the ends of the limits the worker loop's calls test, read once (a comparison, not a method call, per ask)
_TAG_LEAST, _TAG_MOST = int(TAG_CHARS.ge or 0), int(TAG_CHARS.le or 0)
_STEP_LEAST, _STEP_MOST = int(REPORT_STEP.ge or 0), int(REPORT_STEP.le or 0)


def check_tag(tag: Any) -> str | None:
    if tag is None:
        return None
    if not isinstance(tag, str) or not _TAG_LEAST <= len(tag) <= _TAG_MOST or not tag.isprintable():
        raise invalid(f"tag: give {TAG_CHARS.ge}-{TAG_CHARS.le} printable characters, got {tag!r}")
    return check_text("tag", tag, int(TAG_CHARS.le or 0))


def check_bandwidth(n: Any) -> int:
    n = integral(n)
    if not isinstance(n, int) or n not in COUNT:
        raise invalid(f"parallel_bandwidth: give an integer >= {COUNT.ge}, got {n!r}")
    return n


def check_ttl(ttl: Any) -> float | None:
    if ttl is None:
        return None
    if ttl not in POSITIVE_SECONDS or not math.isfinite(ttl):
        raise invalid(f"suggestion_ttl_s: give a number of seconds > {POSITIVE_SECONDS.gt} (or null for none), got {ttl!r}")
    return float(ttl)


def _count_or_none(field: str, n: Any, none_means: str) -> int | None:
    if n is None:
        return None
    n = integral(n)
    if not isinstance(n, int) or n not in COUNT:
        raise invalid(f"{field}: give an integer >= {COUNT.ge} (or null for {none_means}), got {n!r}")
    return n


def check_budget(budget: Any) -> int | None:
    return _count_or_none("observation_budget", budget, "none")


def check_max_failures(n: Any) -> int | None:
    return _count_or_none("max_consecutive_failures", n, "no cap")


def check_strategy(strategy: Any, known: Sequence[str]) -> str:
    """`strategy` if it is one of `known` (the registry's names, which the caller passes: the
    registry imports the space, which imports these rules)."""
    if strategy not in known:
        raise invalid(f"strategy: {strategy!r} is not one of {list(known)}")
    return strategy


def check_value_and_metrics(value: Any, failed: Any, metrics: Any) -> tuple[float | None, bool, dict[str, float]]:
    if not isinstance(failed, bool):
        raise invalid(f"failed: give true or false, got {failed!r}")
    if failed:
        if value is not None:
            raise invalid("give value or failed=true, not both")
    else:
        if value is None:
            raise invalid("value: give the metric's value (a finite number), or failed=true")
        value = plain_number(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise invalid(f"value: give a finite number, got {_shown(value)}; {PASS_FLOAT}")
        if not math.isfinite(as_float("value", value)):
            raise invalid(f"value: {value!r} is not finite; report a failed evaluation with failed=true")
        value = float(value)
    return value, failed, _numbers("metrics", metrics)


def _numbers(where: str, given: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    if given is not None:
        if not isinstance(given, Mapping):
            raise invalid(f"{where}: give a dict of metric name to finite number")
        check_count(where, len(given), MAX_METRICS, "metric names")
        for k, v in given.items():
            v = plain_number(v)
            if not isinstance(k, str) or not k:
                raise invalid(f"{where}: names must be non-empty strings, got {k!r}")
            check_text(f"{where} name {k!r}", k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(as_float(f"{where}.{k}", v)):
                raise invalid(f"{where}.{k}: give a finite number, got {_shown(v)}; {PASS_FLOAT}")
            out[k] = float(v)
    return out


def check_observation(
    experiment: Experiment, value: Any, failed: Any, metrics: Any, values: Any
) -> tuple[float | None, bool, dict[str, float]]:
    """An observation's (value, failed, metrics) for this experiment's metrics.

    The outcome is exactly one of `value=` (the first objective's value, enough for
    one objective without constraints), `values={name: number}` (every objective and
    constraint metric at once, the first objective too) or `failed=True` (no values;
    what it measured may go in `metrics=`), as /openapi.json's ObserveBody says.
    The first objective is stored as `value`, every other metric in `metrics` (so
    observations written before multi-objective read the same). A successful
    observation must report each declared metric; a failed one has none."""
    if values is None and metrics is None and len(experiment.metrics) == 1:
        value, failed, _ = check_value_and_metrics(value, failed, None)  # the usual observe: one value
        return value, failed, {}
    primary = experiment.metric.name
    names = [m.name for m in experiment.metrics]
    if values is not None and (value is not None or failed is True):
        every = "values={" + ", ".join(f"{n!r}: ..." for n in names) + "}"
        if failed is True:
            raise invalid(
                f"give values= or failed=true, not both: a failed evaluation has no values; send failed=true "
                f"alone (what it measured may go in metrics=), or {every} alone for a successful one"
            )
        alone = "value=... alone, or " if len(names) == 1 else ""
        raise invalid(
            f"give value= or values=, not both: send {alone}{every} alone (values= takes every objective and "
            f"constraint metric by name, the first objective {primary!r} too)"
        )
    given = _numbers("values", values)
    unknown = [k for k in given if k not in names]
    if unknown:
        raise invalid(
            f"values: {unknown} not a metric of this experiment ({names}); values= takes its objectives and "
            "constraint metrics, anything else goes in metrics="
        )
    if primary in given:
        value = given.pop(primary)
    if value is None and failed is False and len(experiment.metrics) > 1:
        missing = [m.name for m in experiment.metrics if m.name not in given and m.name not in (metrics or {})]
        raise invalid(
            f"values: {missing} missing; report every objective and constraint metric of this experiment "
            f"({[m.name for m in experiment.metrics]}) in values=, or failed=true"
        )
    value, failed, extra = check_value_and_metrics(value, failed, metrics)
    for name, v in (*given.items(), (primary, value)):
        if v is not None and name in extra and extra[name] != v:
            raise invalid(
                f"metrics: {name!r} is given twice with different values ({extra[name]!r} in metrics=, {v!r} in "
                f"{'values=' if name in given else 'value='}); give each metric once"
            )
    merged = {**extra, **given}
    if not failed:
        missing = [m.name for m in experiment.metrics[1:] if m.name not in merged]
        if missing:
            raise invalid(
                f"values: {missing} missing; report every objective and constraint metric of this experiment "
                f"({[m.name for m in experiment.metrics]}) in values=, or failed=true"
            )
    return value, failed, merged


def check_early_stopping(spec: Any) -> dict[str, Any]:
    """The stopping rule's normal JSON form ({"rule": ...} with every option); the rule's
    own parser (`_stopping.parse_rule`) judges it."""

    return rule_to_json(parse_rule(spec))


def check_report(step: Any, value: Any) -> tuple[int, float]:
    """An intermediate report's (step, value)."""
    if isinstance(step, bool) or not isinstance(step, int) or not _STEP_LEAST <= step <= _STEP_MOST:
        raise invalid(f"step: give an integer from {REPORT_STEP.ge} to 2**53 (epochs, iterations), got {step!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise invalid(f"value: give the objective's intermediate value as a finite number, got {value!r}")
    return step, float(value)


def check_update(changes: Mapping[str, Any]) -> dict[str, Any]:
    """The fields update_experiment was given, each judged by its rule (the parameters are
    judged against the stored space by the experiment's actor)."""
    unknown = sorted(set(changes) - set(UPDATABLE))
    if unknown:
        raise invalid(f"unknown or read-only field(s) {unknown}; updatable fields are {list(UPDATABLE)}")
    return {key: _UPDATE_RULES[key](value) if key in _UPDATE_RULES else value for key, value in changes.items()}


_UPDATE_RULES: dict[str, Callable[[Any], Any]] = {
    "name": check_name, "parallel_bandwidth": check_bandwidth, "suggestion_ttl_s": check_ttl, "observation_budget": check_budget,
    "early_stopping": check_early_stopping, "max_consecutive_failures": check_max_failures,
    "description": check_description, "metadata": check_metadata,
}  # fmt: skip


# create_experiment's keywords at these values were not given (the spec's defaults)
_KEYWORD_DEFAULTS: dict[str, Any] = {"parallel_bandwidth": 1, "strategy": "auto"}


def spec_given(spec: Any, keywords: Mapping[str, Any]) -> dict[str, Any]:
    """create_experiment's spec as one dict of its fields (each judged later, by
    `ExperimentSpec`). Without `spec`: the keywords, every one (the usual call). With it (an
    `ExperimentSpec`, or a dict of its fields): the spec's fields and the keywords given
    beside it, those left at their defaults (None, parallel_bandwidth 1, strategy "auto")
    not counting as given; a field given both ways is refused."""
    if spec is None:
        return dict(keywords)
    if not isinstance(spec, Mapping):
        to_dict = getattr(spec, "to_dict", None)  # an ExperimentSpec (its module loads pydantic)
        if not callable(to_dict):
            raise invalid(f"spec: give an ExperimentSpec or a dict of its fields, got {type(spec).__name__}")
        spec = to_dict()
    given = dict(spec)
    for key, value in keywords.items():
        default = _KEYWORD_DEFAULTS.get(key)
        if value is None or (type(value) is type(default) and value == default):
            continue
        if given.get(key) is not None:
            raise invalid(f"{key}: given both in spec and as a keyword; give it once")
        given[key] = value
    return given


def invalid_fields(errors: Iterable[Mapping[str, Any]], prefix: tuple[str, ...] = ()) -> ApiError:
    """invalid_request from pydantic's error list: `field: problem` for the first five."""
    problems = []
    for err in errors:
        loc = ".".join(str(p) for p in prefix + tuple(err.get("loc", ()))) or "body"
        problems.append({"field": loc, "problem": str(err.get("msg", "invalid")) + _pass_float(loc, err)})
    message = "; ".join(f"{p['field']}: {p['problem']}" for p in problems[:5]) or "invalid request"
    return api_error("invalid_request", message, errors=problems)


def _pass_float(loc: str, err: Mapping[str, Any]) -> str:
    """The local door's advice for a value that is not a number: the same words everywhere."""
    measured = loc.split(".", 1)[0] in ("value", "metrics", "assignments")
    return f"; {PASS_FLOAT}" if measured and str(err.get("type", "")).startswith(("float_", "int_")) else ""
