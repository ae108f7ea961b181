"""An experiment as one JSON document, and back: what `export_experiment` writes and
`import_experiment` reads.

    {"format": "tauopt.experiment", "version": 1,
     "experiment": {...as the API returns it...}, "drawn": int,
     "suggestions": [...], "observations": [...], "reports": [...]}

Every stored field is kept (a suggestion's lease `attempts` and `released`, an
observation's metrics and `stopped_at_step`, timestamps), so an import is the
experiment as it was: the same history, states and counters, under a new id and
the importing credential. The history rebuilds the actor like any stored one, so
the strategies start from the imported observations.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import invalid
from ..models import Experiment, Observation, Report, Suggestion
from ..store import PutExperiment, PutObservation, PutReport, PutSuggestion, Snapshot, Write

__all__ = ["FORMAT", "VERSION", "export_document", "check_document", "check_imported_state", "imported_writes"]

FORMAT = "tauopt.experiment"
VERSION = 1


def export_document(snapshot: Snapshot) -> dict[str, Any]:
    """The document of a stored experiment (a Snapshot, as the actor is rebuilt from)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "experiment": snapshot.experiment.to_dict(),
        "drawn": snapshot.drawn,
        "suggestions": [dict(s.to_dict(), attempts=s.attempts, released=s.released) for s in snapshot.suggestions],
        "observations": [o.to_dict() for o in snapshot.observations],
        "reports": [r.to_dict() for r in snapshot.reports],
    }


def check_document(data: Any) -> Mapping[str, Any]:
    """The document's envelope, or invalid_request saying what an export looks like."""
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise invalid(
            f"import: give a document written by export_experiment (`tauopt experiments export ID`), "
            f"an object with \"format\": \"{FORMAT}\""
        )
    if data.get("version") != VERSION:
        raise invalid(f"import: version {data.get('version')!r} is not one this tauopt reads ({VERSION}); upgrade tauopt")
    for key in ("experiment", "suggestions", "observations", "reports"):
        if key not in data:
            raise invalid(f"import: the document has no {key!r}; export the experiment again")
    if not isinstance(data["experiment"], Mapping):
        raise invalid("import: 'experiment' must be an object (the experiment as the API returns it)")
    return data


def check_imported_state(e: Mapping[str, Any]) -> dict[str, Any]:
    """What an import keeps of the exported header beyond its spec: state, creation time,
    the failure count and stop reason."""
    state = e.get("state", "active")
    if state not in ("active", "completed", "archived"):
        raise invalid(f"import: experiment.state {state!r} is not one of active, completed, archived")
    created_at, failures, reason = e.get("created_at", 0.0), e.get("consecutive_failures", 0), e.get("stopped_reason")
    if isinstance(created_at, bool) or not isinstance(created_at, (int, float)):
        raise invalid(f"import: experiment.created_at must be epoch seconds, not {created_at!r}")
    if isinstance(failures, bool) or not isinstance(failures, int) or failures < 0:
        raise invalid(f"import: experiment.consecutive_failures must be an integer >= 0, not {failures!r}")
    if reason is not None and not isinstance(reason, str):
        raise invalid(f"import: experiment.stopped_reason must be text or null, not {reason!r}")
    return {"state": state, "created_at": float(created_at), "consecutive_failures": failures, "stopped_reason": reason}


def imported_writes(data: Mapping[str, Any], exp: Experiment) -> tuple[Snapshot, list[Write]]:
    """The history of `data` under `exp` (a checked experiment with its new id and owner):
    a Snapshot to check it by, and the writes that store it."""
    new_id = exp.id
    try:
        suggestions = tuple(
            Suggestion.from_dict(dict(d, experiment_id=new_id)).evolve(
                attempts=int(d.get("attempts", 1)), released=bool(d.get("released", False))
            )
            for d in _items(data, "suggestions")
        )
        observations = tuple(Observation.from_dict(dict(d, experiment_id=new_id)) for d in _items(data, "observations"))
        reports = tuple(
            Report(str(d["suggestion_id"]), int(d["step"]), float(d["value"]), float(d.get("created_at", 0.0)))
            for d in _items(data, "reports")
        )
        drawn = int(data.get("drawn", 0))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise invalid(f"import: the history is not an export's ({type(exc).__name__}: {exc}); export it again") from None
    header = exp.evolve(
        open_suggestions=sum(1 for s in suggestions if s.state == "open"), observations=len(observations)
    )
    snapshot = Snapshot(header, suggestions, observations, drawn, reports)
    writes: list[Write] = [PutExperiment(header, drawn)]
    writes += [PutSuggestion(s) for s in suggestions]
    writes += [PutObservation(o) for o in observations]
    writes += [PutReport(new_id, r) for r in reports]
    return snapshot, writes


def _items(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = data[key]
    if not isinstance(items, list) or not all(isinstance(d, Mapping) for d in items):
        raise invalid(f"import: {key!r} must be a list of objects, as export_experiment writes it")
    return items
