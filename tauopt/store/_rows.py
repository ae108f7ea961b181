"""Writes as rows and rows as a Snapshot: what every SQL store stores, built once.

Both SQL stores (SQLite, PostgreSQL) keep the same tables with the same columns
in the same order; they differ only in SQL dialect and driver. So a group of
batches becomes `GroupRows` here (a later write of a key replaces an earlier
one), each write a tuple of plain values (`experiment_row`, ...), and a store's
SELECTs in the column order of `SUGGESTION_COLUMNS` etc. come back as a
Snapshot through `snapshot_of`.

A new write type: a field in GroupRows, a branch in `GroupRows.of`, a statement
in each SQL store's plan.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence, TypeVar

from ..models import Experiment, Observation, Report, Suggestion
from ._base import (
    CredentialRecord,
    DeleteExperiment,
    PutCounters,
    PutCredential,
    PutExperiment,
    PutObservation,
    PutRecord,
    PutReport,
    PutSuggestion,
    RevokeCredential,
    Snapshot,
    StoreError,
    Write,
)

__all__ = [
    "GroupRows",
    "prepare",
    "text",
    "experiment_row",
    "suggestion_row",
    "observation_row",
    "credential_row",
    "report_row",
    "record_row",
    "experiment_of",
    "experiments_query",
    "snapshot_of",
    "HEAD_COLUMNS",
    "SUGGESTION_COLUMNS",
    "OBSERVATION_COLUMNS",
    "REPORT_COLUMNS",
    "CREDENTIAL_COLUMNS",
]

P = TypeVar("P")

# The SELECT lists `snapshot_of` and CredentialRecord read, in this order.
HEAD_COLUMNS = "owner, drawn, body, open_suggestions, observations"
SUGGESTION_COLUMNS = "id, state, tag, created_at, assignments, attempts, released"
OBSERVATION_COLUMNS = "id, suggestion_id, value, failed, created_at, assignments, metrics, stopped_at_step"
REPORT_COLUMNS = "suggestion_id, step, value, created_at"
CREDENTIAL_COLUMNS = "id, name, token_hash, created_at, suggestions_per_day, max_active_experiments, revoked_at"

_dumps = json.JSONEncoder(separators=(",", ":")).encode  # one encoder, not one per call


def text(value: str | None) -> str | None:
    # A lone surrogate would make the driver fail the whole transaction; fail the batch instead.
    if value is not None and not value.isascii():  # isascii is a flag lookup: ids and tags cost nothing
        value.encode("utf-8")
    return value


def experiment_row(w: PutExperiment) -> tuple[Any, ...]:
    """(id, owner, state, name, created_at, open_suggestions, observations, drawn, body)"""
    e = w.experiment
    return (
        text(e.id), text(e.owner), e.state, text(e.name), float(e.created_at),
        int(e.open_suggestions), int(e.observations), int(w.drawn), _dumps(e.to_dict()),
    )  # fmt: skip


def suggestion_row(s: Suggestion) -> tuple[Any, ...]:
    """(experiment_id, id, state, tag, created_at, assignments, attempts, released)"""
    return (
        text(s.experiment_id), text(s.id), s.state, text(s.tag), float(s.created_at), _dumps(s.assignments),
        int(s.attempts), int(bool(s.released)),
    )  # fmt: skip


def observation_row(o: Observation) -> tuple[Any, ...]:
    """(experiment_id, id, suggestion_id, value, failed, created_at, assignments, metrics, stopped_at_step)"""
    return (
        text(o.experiment_id), text(o.id), text(o.suggestion_id), None if o.value is None else float(o.value),
        int(bool(o.failed)), float(o.created_at), _dumps(o.assignments), _dumps(o.metrics),
        None if o.stopped_at_step is None else int(o.stopped_at_step),
    )  # fmt: skip


def credential_row(c: CredentialRecord) -> tuple[Any, ...]:
    """(id, name, token_hash, created_at, revoked_at, suggestions_per_day, max_active_experiments)"""
    return (
        text(c.id), text(c.name), text(c.token_hash), float(c.created_at),
        None if c.revoked_at is None else float(c.revoked_at),
        None if c.suggestions_per_day is None else int(c.suggestions_per_day),
        None if c.max_active_experiments is None else int(c.max_active_experiments),
    )  # fmt: skip


def record_row(key: tuple[str, str], body: str) -> tuple[Any, ...]:
    """(experiment_id, key, body)"""
    return (text(key[0]), text(key[1]), text(body))


def report_row(r: PutReport) -> tuple[Any, ...]:
    """(experiment_id, suggestion_id, step, value, created_at)"""
    return (
        text(r.experiment_id), text(r.report.suggestion_id), int(r.report.step), float(r.report.value),
        float(r.report.created_at),
    )  # fmt: skip


@dataclass
class GroupRows:
    """One group's writes by key; a later write of a key replaces an earlier one
    (keeping the key's first position), so an experiment header rewritten by 64
    batches of a group is turned into a row once."""

    experiments: dict[str, PutExperiment]
    counters: dict[str, PutCounters]
    suggestions: dict[tuple[str, str], Suggestion]
    observations: dict[tuple[str, str], Observation]
    credentials: dict[str, CredentialRecord]
    revokes: list[RevokeCredential]
    reports: list[PutReport]
    records: dict[tuple[str, str], str]
    deletes: dict[str, None]  # experiment ids, deleted before the group's other statements

    @classmethod
    def of(cls, batches: Sequence[Sequence[Write]]) -> "GroupRows":
        rows = cls({}, {}, {}, {}, {}, [], [], {}, {})
        for writes in batches:
            for w in writes:
                if isinstance(w, PutExperiment):
                    rows.experiments[w.experiment.id] = w
                    rows.counters.pop(w.experiment.id, None)  # the header carries newer counters
                elif isinstance(w, PutCounters):
                    head = rows.experiments.get(w.experiment_id)
                    if head is None:
                        rows.counters[w.experiment_id] = w
                    else:  # later than a header of this group: fold into it (keeps statement order simple)
                        e = head.experiment.evolve(open_suggestions=w.open_suggestions, observations=w.observations)
                        rows.experiments[w.experiment_id] = PutExperiment(e, w.drawn)
                elif isinstance(w, PutSuggestion):
                    rows.suggestions[(w.suggestion.experiment_id, w.suggestion.id)] = w.suggestion
                elif isinstance(w, PutObservation):
                    rows.observations[(w.observation.experiment_id, w.observation.id)] = w.observation
                elif isinstance(w, PutCredential):
                    rows.credentials[w.credential.id] = w.credential
                elif isinstance(w, RevokeCredential):
                    rows.revokes.append(w)
                elif isinstance(w, PutReport):
                    rows.reports.append(w)
                elif isinstance(w, PutRecord):
                    rows.records[(w.experiment_id, w.key)] = w.body
                elif isinstance(w, DeleteExperiment):
                    rows.forget(w.experiment_id)  # what came before it in the group is deleted with it
                    rows.deletes[w.experiment_id] = None
                else:
                    raise TypeError(f"not a store write: {w!r}")
        return rows

    def forget(self, experiment_id: str) -> None:
        self.experiments.pop(experiment_id, None)
        self.counters.pop(experiment_id, None)
        self.suggestions = {k: v for k, v in self.suggestions.items() if k[0] != experiment_id}
        self.observations = {k: v for k, v in self.observations.items() if k[0] != experiment_id}
        self.reports = [r for r in self.reports if r.experiment_id != experiment_id]
        self.records = {k: v for k, v in self.records.items() if k[0] != experiment_id}


def prepare(
    batches: Sequence[Sequence[Write]], plan: Callable[[GroupRows], P]
) -> tuple[P, list[BaseException | None]]:
    """One plan for the group (`plan` turns rows into a store's statements and raises
    if an object cannot be turned into a row); a batch that cannot be stored fails alone."""
    outcome: list[BaseException | None] = [None] * len(batches)
    try:
        return plan(GroupRows.of(batches)), outcome
    except Exception:
        pass  # rare: find the batch that cannot be stored, fail it alone, store the others
    for i, writes in enumerate(batches):
        try:
            plan(GroupRows.of([writes]))
        except Exception as exc:
            outcome[i] = StoreError(f"cannot store this batch ({type(exc).__name__}: {exc})")
    return plan(GroupRows.of([w for w, o in zip(batches, outcome) if o is None])), outcome


def experiments_query(
    mark: Callable[[int], str], state: str | None, owner: str | None, after: str | None, limit: int | None,
    name: str | None, not_indexed: str = "", named: str | None = None,
) -> tuple[str, list[Any]]:
    """The SELECT of a listing of experiments (the `Store.list_experiments` arguments) and
    its parameters, the n-th written by `mark(n)` (SQLite ?n, PostgreSQL $n::text). In
    store order (seq): the cursor `after` is an experiment's id, found by its unique
    index, and a page reads on from its seq by the primary key, whatever the store holds.
    `not_indexed` prefixes the owner and state columns: SQLite's "+" keeps its planner off
    the (owner, state) index, which read every experiment of the owner and sorted them
    for each page (100,000 experiments: a page 8x slower than at 1,000). `named`: only
    the experiments of exactly that name, found by the name index."""
    params: list[Any] = []

    def p(value: Any) -> str:
        params.append(value)
        return mark(len(params))

    where = []
    if state is not None:
        where.append(f"{not_indexed}state = {p(state)}")
    if owner is not None:
        where.append(f"({not_indexed}owner = {p(owner)} OR {not_indexed}owner IS NULL)")
    if after is not None:
        where.append(f"seq > (SELECT seq FROM experiments WHERE id = {p(after)})")
    if name is not None:
        pattern = "%" + name.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where.append(f"lower(name) LIKE {p(pattern)} ESCAPE '\\'")
    if named is not None:
        where.append(f"name = {p(named)}")
    sql = "SELECT owner, body, open_suggestions, observations FROM experiments"
    sql += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY seq"
    return sql + (f" LIMIT {int(limit)}" if limit is not None else ""), params


# Experiments by state, and the busiest (most open suggestions, then most observations)
# that are not archived: aggregated by the database from the index columns, no body read.
STATES_QUERY = "SELECT state, count(*) FROM experiments GROUP BY state"
BUSIEST_QUERY = (
    "SELECT id, open_suggestions, observations FROM experiments WHERE state <> 'archived' "
    "ORDER BY open_suggestions DESC, observations DESC, id LIMIT {top}"
)


def experiment_of(body: str, owner: str | None, open_suggestions: int, observations: int) -> Experiment:
    """The header from its JSON body, with the counters of their own columns (PutCounters updates only those)."""
    e = Experiment.from_dict(json.loads(body), owner=owner)
    return e.evolve(open_suggestions=int(open_suggestions), observations=int(observations))


def snapshot_of(
    experiment_id: str,
    head: Sequence[Any],
    srows: Iterable[Any],
    orows: Iterable[Any],
    rrows: Iterable[Any],
    records: Iterable[Any] = (),
) -> Snapshot:
    """A Snapshot from rows SELECTed in HEAD_/SUGGESTION_/OBSERVATION_/REPORT_COLUMNS order
    and the experiment's (key, body) records."""
    owner, drawn, body, n_open, n_obs = head
    experiment = experiment_of(body, owner, n_open, n_obs)
    # An actor holds its whole history, so a long one is read into as few objects as
    # it can be: one string object per distinct name, state, tag or text value, and an
    # observation of a suggestion shares its suggestion's id and (when the stored text
    # is the same) its assignments dict, as they are shared when observed live. Points
    # are never mutated once made, so sharing one is safe.
    shared: dict[Any, Any] = {}
    one = shared.setdefault
    points: dict[str, tuple[str, str, dict[str, Any]]] = {}  # suggestion id -> (that id, its assignments' text, decoded)

    def point(text: str) -> dict[str, Any]:
        return {one(k, k): one(v, v) if type(v) is str else v for k, v in json.loads(text).items()}

    suggestions = []
    for sid, state, tag, created_at, a, n, released in srows:
        assignments = point(a)
        points[sid] = (sid, a, assignments)
        tag = tag if tag is None else one(tag, tag)
        suggestions.append(Suggestion(sid, experiment_id, assignments, one(state, state), tag, created_at, int(n), bool(released)))
    observations = []
    for oid, sug, value, failed, created_at, a, m, stopped in orows:
        held = None if sug is None else points.get(sug)
        if held is None:
            assignments = point(a)
        else:
            sug, assignments = held[0], held[2] if held[1] == a else point(a)
        observations.append(Observation(oid, experiment_id, sug, assignments, value, bool(failed), created_at, json.loads(m), stopped))
    reports = tuple(Report(sid, int(step), float(v), t) for sid, step, v, t in rrows)
    return Snapshot(experiment, tuple(suggestions), tuple(observations), int(drawn), reports, tuple((k, b) for k, b in records))
