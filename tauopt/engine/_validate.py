"""Checks of user input that are not about the space (the space checks itself)."""

from __future__ import annotations

import math
from typing import Any, Mapping

from .._numbers import PASS_FLOAT, plain_number
from .._numbers import shown as _shown
from ..errors import invalid
from ..limits import MAX_DESCRIPTION_CHARS, MAX_METRICS, MAX_NAME_CHARS, as_float, check_count, check_text, check_wait
from ..models import Experiment
from ..strategies import names  # the registry: every strategy name, and auto
from ._curves import check_early_stopping

__all__ = ["check_tag", "check_bandwidth", "check_ttl", "check_budget", "check_update", "check_value_and_metrics", "check_observation", "check_name", "check_strategy", "check_wait", "check_max_failures", "check_description"]

_UPDATABLE = ("name", "parallel_bandwidth", "suggestion_ttl_s", "observation_budget", "parameters", "early_stopping", "max_consecutive_failures")


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


def check_tag(tag: Any) -> str | None:
    if tag is None:
        return None
    if not isinstance(tag, str) or not 1 <= len(tag) <= 128 or not tag.isprintable():
        raise invalid(f"tag: give 1-128 printable characters, got {tag!r}")
    return check_text("tag", tag, 128)


def check_bandwidth(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise invalid(f"parallel_bandwidth: give an integer >= 1, got {n!r}")
    return n


def check_ttl(ttl: Any) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
        raise invalid(f"suggestion_ttl_s: give a number of seconds > 0 (or null for none), got {ttl!r}")
    return float(ttl)


def _count_or_none(field: str, n: Any, none_means: str) -> int | None:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise invalid(f"{field}: give an integer >= 1 (or null for {none_means}), got {n!r}")
    return n


def check_budget(budget: Any) -> int | None:
    return _count_or_none("observation_budget", budget, "none")


def check_max_failures(n: Any) -> int | None:
    return _count_or_none("max_consecutive_failures", n, "no cap")


def check_strategy(strategy: Any) -> str:
    if strategy not in names():
        raise invalid(f"strategy: {strategy!r} is not one of {list(names())}")
    return strategy


def check_update(changes: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(changes) - set(_UPDATABLE))
    if unknown:
        raise invalid(f"unknown or read-only field(s) {unknown}; updatable fields are {list(_UPDATABLE)}")
    out: dict[str, Any] = {}
    for key, value in changes.items():
        if key == "name":
            out[key] = check_name(value)
        elif key == "parallel_bandwidth":
            out[key] = check_bandwidth(value)
        elif key == "suggestion_ttl_s":
            out[key] = check_ttl(value)
        elif key == "observation_budget":
            out[key] = check_budget(value)
        elif key == "early_stopping":
            out[key] = check_early_stopping(value)
        elif key == "max_consecutive_failures":
            out[key] = check_max_failures(value)
        else:
            out[key] = value
    return out


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

