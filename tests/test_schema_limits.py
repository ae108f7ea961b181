"""Each simple limit is declared once (`tauopt.limits.Range`): the rule refuses a value just
past it and takes the value at it, and /openapi.json's types state the same end, because
both read the one declaration."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from pydantic import BaseModel, TypeAdapter

from tauopt.errors import ApiError
from tauopt.limits import (
    COUNT, METADATA_KEY_CHARS, POSITIVE_SECONDS, REPORT_STEP, STOPPING_OPTIONS, STRATEGY_OPTIONS, TAG_CHARS, WAIT_S, Range,
)  # fmt: skip
from tauopt.schema import (
    ExperimentSpec, ReportBody, SuggestBody, check_bandwidth, check_budget, check_early_stopping, check_max_failures,
    check_metadata, check_report, check_tag, check_ttl, check_wait, parse_strategy_options,
)  # fmt: skip
from tauopt.schema._spec import AshaStopping, MedianStopping, StrategyOptionsSpec

KEYWORDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum"}
LENGTHS = {"ge": "minLength", "le": "maxLength"}


def _field(model: type[BaseModel], name: str) -> dict[str, Any]:
    """A field's document, the non-null branch of an `anyOf` (or its keywords at the top)."""
    field = model.model_json_schema()["properties"][name]
    return next((s for s in field.get("anyOf", ()) if s.get("type") != "null"), field)


def _stated(doc: dict[str, Any], limit: Range, names: dict[str, str]) -> dict[str, Any]:
    return {names[k]: doc.get(names[k]) for k in names if getattr(limit, k) is not None}


def _declared(limit: Range, names: dict[str, str]) -> dict[str, Any]:
    return {names[k]: getattr(limit, k) for k in names if getattr(limit, k) is not None}


ASHA = {"rule": "asha", "max_step": 9}
NUMBERS: list[tuple[str, Range, dict[str, Any], Callable[[Any], Any]]] = [
    ("parallel_bandwidth", COUNT, _field(ExperimentSpec, "parallel_bandwidth"), check_bandwidth),
    ("observation_budget", COUNT, _field(ExperimentSpec, "observation_budget"), check_budget),
    ("max_consecutive_failures", COUNT, _field(ExperimentSpec, "max_consecutive_failures"), check_max_failures),
    ("suggestion_ttl_s", POSITIVE_SECONDS, _field(ExperimentSpec, "suggestion_ttl_s"), check_ttl),
    ("wait_s", WAIT_S, _field(SuggestBody, "wait_s"), check_wait),
    ("report step", REPORT_STEP, _field(ReportBody, "step"), lambda v: check_report(v, 0.0)),
    *[(f"strategy_options.{k}", r, _field(StrategyOptionsSpec, k), lambda v, k=k: parse_strategy_options({k: v}))
      for k, r in STRATEGY_OPTIONS.items()],
    *[(f"early_stopping.{k}", STOPPING_OPTIONS[k], _field(MedianStopping, k), lambda v, k=k: check_early_stopping({"rule": "median", k: v}))
      for k in ("min_trials", "grace_steps")],
    *[(f"early_stopping.{k}", STOPPING_OPTIONS[k], _field(AshaStopping, k),
       lambda v, k=k: check_early_stopping({**ASHA, "max_step": 2**31, k: v} if k != "max_step" else {**ASHA, k: v}))
      for k in ("max_step", "min_step", "reduction_factor")],
]  # fmt: skip
TEXTS: list[tuple[str, Range, dict[str, Any], Callable[[Any], Any]]] = [
    ("tag", TAG_CHARS, _field(SuggestBody, "tag"), check_tag),
    ("metadata key", METADATA_KEY_CHARS, TypeAdapter(ExperimentSpec).json_schema()["properties"]["metadata"]["anyOf"][0]["propertyNames"],
     lambda key: check_metadata({key: 1})),
]  # fmt: skip


@pytest.mark.parametrize("where,limit,doc,rule", NUMBERS, ids=[c[0] for c in NUMBERS])
def test_a_number_limit_is_the_documents_and_the_rules(where: str, limit: Range, doc: dict[str, Any], rule: Callable[[Any], Any]) -> None:
    assert _stated(doc, limit, KEYWORDS) == _declared(limit, KEYWORDS)
    for end, past in ((limit.ge, -1), (limit.le, 1)):
        if end is not None:
            if (where, end) != ("early_stopping.min_step", limit.le):  # max_step, at most the same, must be above it
                rule(end)  # the end itself is taken
            with pytest.raises(ApiError):
                rule(end + past)
    if limit.gt is not None:
        rule(limit.gt + 0.5)
        with pytest.raises(ApiError):
            rule(limit.gt)


@pytest.mark.parametrize("where,limit,doc,rule", TEXTS, ids=[c[0] for c in TEXTS])
def test_a_length_limit_is_the_documents_and_the_rules(where: str, limit: Range, doc: dict[str, Any], rule: Callable[[Any], Any]) -> None:
    assert _stated(doc, limit, LENGTHS) == _declared(limit, LENGTHS)
    assert limit.ge is not None and limit.le is not None
    rule("x" * int(limit.le))
    rule("x" * int(limit.ge))
    for bad in ("x" * (int(limit.le) + 1), "x" * (int(limit.ge) - 1)):
        with pytest.raises(ApiError):
            rule(bad)


def test_a_wait_too_large_for_a_float_is_refused_not_an_overflow() -> None:
    with pytest.raises(ApiError, match="wait_s: give a number of seconds from 0 to 300"):
        check_wait(10**400)
