"""Curves: an experiment's intermediate reports and its stopping rule (an actor collaborator).

The actor owns one; a report is answered from the per-step statistics kept in
`CurveStats` (no pass over the history). Rebuilt from a snapshot by feeding
the stored reports, then the observations, back in: the statistics a rule
reads do not depend on the order they were fed in.
"""

from __future__ import annotations

from typing import Any

from ..errors import invalid
from ..models import Report, ReportDecision
from ..store import Snapshot
from ..strategies.stopping import CurveStats, StepOrderError, StoppingRule, parse_rule

__all__ = ["Curves"]


class Curves:
    def __init__(self, snapshot: Snapshot) -> None:
        exp = snapshot.experiment
        self.stats = CurveStats(parse_rule(exp.early_stopping), maximize=exp.metric.objective == "maximize")
        self.reports: list[Report] = []
        for r in snapshot.reports:
            self.stats.report(r.suggestion_id, r.step, r.value)
            self.reports.append(r)
        for o in snapshot.observations:
            if o.suggestion_id is not None:
                self.stats.complete(o.suggestion_id, stopped=o.stopped_at_step is not None)

    def set_rule(self, rule_json: dict[str, Any]) -> None:
        self.stats.set_rule(parse_rule(rule_json))

    @property
    def rule(self) -> StoppingRule:
        return self.stats.rule

    def report(self, suggestion_id: str, step: int, value: float, now: float) -> tuple[Report, ReportDecision]:
        try:
            decision = self.stats.report(suggestion_id, step, value)
        except StepOrderError as exc:
            raise invalid(f"step: {exc}; report steps in increasing order") from exc
        report = Report(suggestion_id, step, value, now)
        self.reports.append(report)
        reason = decision.reason
        if reason is None and self.stats.rule.rule == "none":
            reason = (
                "recorded; this experiment has no early-stopping rule, so nothing is ever stopped: set one with "
                'update_experiment(id, early_stopping={"rule": "median"}) or {"rule": "asha", "max_step": N}'
            )
        return report, ReportDecision(decision.should_stop, reason)

    def observed(self, suggestion_id: str, stopped: bool) -> int | None:
        """The suggestion was observed; returns the step it stopped at (stopped=True)."""
        if not stopped:  # the usual observe: no step to look up
            self.stats.complete(suggestion_id)
            return None
        last = self.stats.last_step(suggestion_id)
        if last is None:
            raise invalid("stopped: this suggestion reported no step; report before observing with stopped=true")
        self.stats.complete(suggestion_id, stopped=True)
        return last

    def log_after(self, after: int, limit: int | None = None) -> dict[str, Any]:
        """The reports from cursor `after` on (at most `limit` of them, the oldest first),
        the cursor to pass next time, and whether more are waiting: a page polling the
        curves reads what is new, and a long log is read in pages."""
        after = min(max(0, after), len(self.reports))
        end = len(self.reports) if limit is None else min(len(self.reports), after + limit)
        return {"cursor": end, "reports": self.reports[after:end], "more": end < len(self.reports)}

    def listing(self, suggestion_id: str | None) -> list[Report]:
        if suggestion_id is None:
            return list(self.reports)
        return [r for r in self.reports if r.suggestion_id == suggestion_id]
