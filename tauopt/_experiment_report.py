"""What `tauopt experiments list|show` print: pure functions from the engine's
`ExperimentReport` (an experiment with the answers of its `best` and `summary`
operations, and for `show` its history) to rows, a table and a summary. Nothing
is computed here: the same reports from a database file and from a running
daemon read alike."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any, Mapping, Sequence

from .engine import ExperimentReport
from .models import Metric

__all__ = ["row", "table", "summary", "as_json", "shown", "stopped_early"]

RECENT_FAILURES = 5
HEADS = ("ID", "NAME", "STATE", "STRATEGY", "OBS/BUDGET", "OPEN/BW", "BEST", "LAST ACTIVITY")


def shown(text: str) -> str:
    """A stored name as a terminal should see it: control, format and line-separator
    characters escaped (an ESC in a name must not drive the terminal, a newline
    must not forge a row)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _ago(then: float, now: float) -> str:
    s = max(0.0, now - then)
    if s < 60:
        return f"{s:.0f}s ago"
    if s < 3600:
        return f"{s / 60:.0f}m ago"
    if s < 86400:
        return f"{s / 3600:.1f}h ago"
    return time.strftime("%Y-%m-%d", time.localtime(then))


def _of(n: int, limit: int | None) -> str:
    return f"{n}/{limit}" if limit is not None else f"{n}/-"


def row(view: ExperimentReport, now: float) -> dict[str, str]:
    """The list's columns: name, state, strategy, observations/budget, open/bandwidth, best, last activity."""
    e, best = view.experiment, view.best
    return {
        "ID": e.id,
        "NAME": shown(e.name)[:24],
        "STATE": e.state,
        "STRATEGY": e.strategy,
        "OBS/BUDGET": _of(e.observations, e.observation_budget),
        "OPEN/BW": _of(e.open_suggestions, e.parallel_bandwidth),
        "BEST": "-" if best is None or best.value is None else f"{best.value:.6g}",
        "LAST ACTIVITY": _ago(view.last_activity, now),
    }


def table(views: Sequence[ExperimentReport], now: float) -> str:
    rows = [row(v, now) for v in views]
    heads = list(HEADS)
    widths = {h: max([len(h)] + [len(r[h]) for r in rows]) for h in heads}
    lines = ["  ".join(h.ljust(widths[h]) for h in heads).rstrip()]
    lines += ["  ".join(r[h].ljust(widths[h]) for h in heads).rstrip() for r in rows]
    if not rows:
        lines.append("(no experiments; create one with `tauopt experiments create --spec FILE`)")
    return "\n".join(lines)


def summary(view: ExperimentReport, now: float) -> str:
    """`experiments show`: best assignments, counts by state and tag, recent failures."""
    e, best = view.experiment, view.best
    r = row(view, now)
    lines = [
        f"{e.id}  {shown(e.name)}  ({e.state})",
        *([f"  description  {shown(e.description)}"] if e.description else []),
        *([f"  metadata     {shown(json.dumps(dict(e.metadata), ensure_ascii=False))}"] if e.metadata else []),
        f"  {'metric ' if len(e.metrics) == 1 else 'metrics'}      {', '.join(_metric(m) for m in e.metrics)}, strategy {e.strategy}",
        f"  observed     {r['OBS/BUDGET']} (budget)   open {r['OPEN/BW']} (bandwidth)   last activity {r['LAST ACTIVITY']}",
    ]
    cut_short = stopped_early(view)
    if e.early_stopping.get("rule", "none") != "none" or cut_short:
        lines.append(f"  early stop   {_rule(e.early_stopping)}: {cut_short} suggestion(s) cut short")
    if best is None:
        lines.append("  best         - (no successful observation yet)")
    else:
        lines.append(f"  best         {best.value:.6g}  {json.dumps(best.assignments, sort_keys=True)}")
    by_state = view.suggestions_by_state
    failed = [o for o in view.observations if o.failed]
    lines.append("  suggestions  " + (", ".join(f"{k} {v}" for k, v in sorted(by_state.items())) or "none"))
    lines.append(f"  observations {e.observations} ({view.failed} failed)")
    if e.stopped_reason is not None:
        lines.append(f"  stopped      {e.stopped_reason}; asks answer too_many_failures until")
        lines.append("               `tauopt experiments update ID --max-consecutive-failures N|none`")
    tags = Counter(shown(s.tag) if s.tag is not None else "(untagged)" for s in view.suggestions)
    if tags:
        lines.append("  by tag       " + ", ".join(f"{t} {n}" for t, n in tags.most_common(10)))
    if failed:
        lines.append("  recent failures:")
        for o in failed[-RECENT_FAILURES:]:
            lines.append(f"    {_ago(o.created_at, now):>9}  {o.suggestion_id or o.id}  {json.dumps(o.assignments, sort_keys=True)}")
    return "\n".join(lines)


def _metric(m: Metric) -> str:
    if m.constraint is not None:
        return f"{shown(m.name)} (constraint {m.constraint.op} {m.constraint.bound:g})"
    return f"{shown(m.name)} ({m.objective})"


def _rule(rule: Mapping[str, Any]) -> str:
    options = {k: v for k, v in rule.items() if k != "rule"}
    name = str(rule.get("rule", "none"))
    return name + (" " + json.dumps(options, sort_keys=True) if options else "")


def stopped_early(view: ExperimentReport) -> int:
    """How many suggestions the early-stopping rule stopped (observed with stopped=True)."""
    return sum(1 for o in view.observations if o.stopped_at_step is not None)


def as_json(view: ExperimentReport) -> dict[str, Any]:
    """The machine-readable form: the experiment as the API returns it, plus the report."""
    best = view.best
    return dict(
        view.experiment.to_dict(),
        owner=view.experiment.owner,
        best=None if best is None else best.to_dict(),
        last_activity=view.last_activity,
        suggestions_by_state=dict(view.suggestions_by_state),
        failed_observations=view.failed,
    )
