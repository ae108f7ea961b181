"""Studies and trials of a trial-based door (Optuna's storage model), owned by the actor.

A study is an experiment; its trials, their numbers, states, parameters with their
distributions, values, intermediate values, attributes and datetimes are held here,
by the experiment's actor, and stored as records: `study` (the study's name, id,
directions, attributes and the distribution of each parameter seen) and
`trial/<number>` (one trial each). The door only translates its wire to these changes.

The trials are the engine's one trial lifecycle (`_lifecycle.TrialSet` of
`TrialRecord`s, as the KerasTuner door's trial queue keeps them): its states are
Optuna's WAITING (enqueued, not claimed), RUNNING, COMPLETE, PRUNED and FAIL, its
claim (RUNNING asked of a WAITING trial) the set's `claim`, won once: the actor
takes one message at a time, so of two workers claiming one trial one hears True
and the other False. A finished trial never changes again (`trial_finished`,
checked before anything else). Each record's `door` is the trial as Optuna sees it
(`Trial`, frozen), made again on each change; it is what is stored. Reads are answered
from `CommittedTrials`, the study and trials as of the actor's last commit, which the
actor publishes as each commit lands: on any thread, never behind a commit in flight.

Attributes are kept as the JSON text they arrived as and returned unchanged; a
distribution is Optuna's JSON form ({"name": ..., "attributes": {...}}); a parameter's
value is the internal float (a categorical's choice index). Trial ids are
`study_id << 32 | number`: unique across studies, increasing within one, and the
study of a trial is read off its id.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence, TypeVar

from ..actors import NOT_NOW
from ..errors import api_error, invalid
from ._lifecycle import LifeState, TrialRecord, TrialSet

__all__ = [
    "TRIAL_STATES",
    "FINISHED",
    "DATETIME_FORMAT",
    "TRIAL_ID_BITS",
    "Study",
    "Trial",
    "TrialBook",
    "CommittedTrials",
    "TrialChange",
    "READS",
    "NewTrial",
    "SetParam",
    "SetState",
    "SetIntermediate",
    "SetTrialAttr",
    "SetStudyAttr",
    "DeleteStudy",
    "ReadStudy",
    "ReadTrial",
    "ReadTrials",
    "TrialIdOf",
    "study_of",
    "check_datetime",
    "check_key",
    "check_attr",
    "check_directions",
    "Distribution",
    "STOPPING_KEY",
    "SHOULD_STOP_KEY",
]

T = TypeVar("T")

TRIAL_STATES = ("RUNNING", "COMPLETE", "PRUNED", "FAIL", "WAITING")
FINISHED = frozenset({"COMPLETE", "PRUNED", "FAIL"})
# Optuna's states as the lifecycle's
_LIFE: Mapping[str, LifeState] = {
    "WAITING": "waiting", "RUNNING": "running", "COMPLETE": "completed", "PRUNED": "pruned", "FAIL": "failed",
}
DIRECTIONS = ("MINIMIZE", "MAXIMIZE")
DATETIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f"  # local time, as Optuna writes and reads it
TRIAL_ID_BITS = 32
MAX_TRIALS = 2**TRIAL_ID_BITS - 1  # per study: the number must fit under the study's bits
MAX_KEY_CHARS = 1024  # an attribute's key or a parameter's name
MAX_ATTR_CHARS = 1024 * 1024  # an attribute's JSON text or a distribution's
MAX_ATTRS = 10_000  # attributes of one study or trial (user and system together)
MAX_STEPS = 100_000  # intermediate values of one trial
MAX_PARAMS = 10_000  # parameters of one trial
STUDY_KEY = "study"
# A study's user attribute that sets its experiment's early-stopping rule (the JSON of
# `early_stopping`, e.g. {"rule": "median", "min_trials": 5}; null: no rule), and the
# system attribute a trial gets once that rule says it should stop (a pruner reads it).
STOPPING_KEY = "tauopt:early_stopping"
SHOULD_STOP_KEY = "tauopt:should_stop"

# Optuna's distribution class names, with the (kind, log) their JSON implies; the
# legacy names are what `distribution_to_json` writes for the deprecated classes.
_DISTRIBUTIONS: Mapping[str, tuple[str, bool | None]] = {
    "FloatDistribution": ("float", None),
    "IntDistribution": ("int", None),
    "CategoricalDistribution": ("categorical", False),
    "UniformDistribution": ("float", False),
    "LogUniformDistribution": ("float", True),
    "DiscreteUniformDistribution": ("float", False),
    "IntUniformDistribution": ("int", False),
    "IntLogUniformDistribution": ("int", True),
}


def study_of(trial_id: int) -> int:
    """The study a trial id belongs to."""
    return trial_id >> TRIAL_ID_BITS


def _finished_error(t: "Trial") -> Exception:
    return api_error("trial_finished", f"trial {t.number} is {t.state}; a finished trial cannot be changed")


def _trial_not_found(trial_id: int) -> Exception:
    return api_error("not_found", f"trial {trial_id} not found")


def check_datetime(where: str, text: str) -> str:
    """`""` (none) or a datetime in DATETIME_FORMAT, kept as given."""
    if text:
        try:
            datetime.strptime(text, DATETIME_FORMAT)
        except ValueError:
            raise invalid(f"{where}: {text[:40]!r} is not a datetime like 2024-01-31 12:00:00.000000") from None
    return text


def check_key(where: str, key: str) -> str:
    if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
        raise invalid(f"{where}: give a name of at most {MAX_KEY_CHARS} characters")
    return key


def check_attr(where: str, text: str) -> str:
    """An attribute's JSON text (Python's json.dumps, NaN and Infinity included), kept unchanged."""
    if len(text) > MAX_ATTR_CHARS:
        raise invalid(f"{where}: {len(text)} characters of JSON; at most {MAX_ATTR_CHARS} fit")
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        raise invalid(f"{where}: not JSON text ({text[:40]!r}); send json.dumps(value)") from None
    return text


def _by_text(fn: Callable[[str], T]) -> Callable[[str], T]:
    """fn(text), computed once per text a study repeats (each parameter's distribution
    comes again with every trial): up to 512 texts of at most 4,096 characters are kept,
    longer ones computed each time. fn's result must not be mutated; an error is not kept."""
    kept = functools.lru_cache(maxsize=512)(fn)

    def by_text(text: str) -> T:
        return kept(text) if len(text) <= 4096 else fn(text)

    return by_text


@dataclass(frozen=True)
class Distribution:
    """What compatibility compares: the class, its log scale, a categorical's choices."""

    name: str
    log: bool
    choices: tuple[Any, ...] | None

    @classmethod
    def parse(cls, text: str) -> "Distribution":
        return _parse_distribution(text)

    @classmethod
    def _parse(cls, text: str) -> "Distribution":
        if len(text) > MAX_ATTR_CHARS:
            raise invalid(f"distribution: {len(text)} characters; at most {MAX_ATTR_CHARS}")
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError):
            raw = None
        name = raw.get("name") if isinstance(raw, dict) else None
        attrs = raw.get("attributes") if isinstance(raw, dict) else None
        if not isinstance(name, str) or name not in _DISTRIBUTIONS or not isinstance(attrs, dict):
            raise invalid(
                f"distribution: {text[:80]!r} is not an Optuna distribution's JSON "
                '({"name": "FloatDistribution|IntDistribution|CategoricalDistribution", "attributes": {...}})'
            )
        kind, log = _DISTRIBUTIONS[name]
        if kind == "categorical":
            choices = attrs.get("choices")
            if not isinstance(choices, list) or not choices:
                raise invalid("distribution: a CategoricalDistribution needs a non-empty list of choices")
            return cls(name, False, tuple(choices))
        for bound in ("low", "high"):
            if not isinstance(attrs.get(bound), (int, float)) or isinstance(attrs.get(bound), bool):
                raise invalid(f"distribution: {name} needs a number {bound!r}")
        return cls(name, bool(attrs.get("log", False)) if log is None else log, None)

    def check_compatible(self, new: "Distribution", param: str) -> None:
        """Optuna's rule for one parameter across a study's trials."""
        if new.name != self.name:
            raise invalid(f"parameter {param!r}: cannot set a {new.name} where a {self.name} was set before")
        if new.log != self.log:
            raise invalid(f"parameter {param!r}: `log` differs from the distribution set before")
        if self.choices is not None and new.choices != self.choices:
            raise invalid(f"parameter {param!r}: the choices differ from the distribution set before")

    def check_value(self, value: float, param: str) -> None:
        if self.choices is not None and not (value == int(value) and 0 <= value < len(self.choices)):
            raise invalid(f"parameter {param!r}: {value!r} is not a choice index of its CategoricalDistribution")


_parse_distribution = _by_text(Distribution._parse)
# a trial's record is written at each change: no spaces (and one encoder, not one per call)
_compact = json.JSONEncoder(separators=(",", ":")).encode


def _as_dict(m: Mapping[str, Any]) -> Mapping[str, Any]:
    return m if type(m) is dict else dict(m)


@dataclass(frozen=True)
class Study:
    study_id: int
    name: str
    directions: tuple[str, ...]
    user_attrs: Mapping[str, str] = field(default_factory=dict)
    system_attrs: Mapping[str, str] = field(default_factory=dict)
    distributions: Mapping[str, str] = field(default_factory=dict)  # the latest of each parameter
    deleted: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "study_id": self.study_id,
                "name": self.name,
                "directions": list(self.directions),
                "user_attrs": dict(self.user_attrs),
                "system_attrs": dict(self.system_attrs),
                "distributions": dict(self.distributions),
                "deleted": self.deleted,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> "Study":
        d = json.loads(text)
        return cls(
            int(d["study_id"]),
            d["name"],
            tuple(d["directions"]),
            d.get("user_attrs", {}),
            d.get("system_attrs", {}),
            d.get("distributions", {}),
            bool(d.get("deleted", False)),
        )


@dataclass(frozen=True)
class Trial:
    trial_id: int
    number: int
    state: str
    values: tuple[float, ...] | None = None
    datetime_start: str = ""
    datetime_complete: str = ""
    params: Mapping[str, float] = field(default_factory=dict)  # internal representation
    distributions: Mapping[str, str] = field(default_factory=dict)
    user_attrs: Mapping[str, str] = field(default_factory=dict)
    system_attrs: Mapping[str, str] = field(default_factory=dict)
    intermediate: Mapping[int, float] = field(default_factory=dict)
    suggestion_id: str | None = None  # the experiment's suggestion this trial is (engine-side, not on the wire)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def key(self) -> str:
        return f"trial/{self.number}"

    def to_json(self) -> str:
        # json writes NaN and +-Infinity as Python's own json reads them back. The maps are
        # dicts (made here, by from_json or by a change): encoded as they are, not copied.
        d = _as_dict
        return _compact(
            {
                "trial_id": self.trial_id,
                "number": self.number,
                "state": self.state,
                "values": None if self.values is None else list(self.values),
                "datetime_start": self.datetime_start,
                "datetime_complete": self.datetime_complete,
                "params": d(self.params),
                "distributions": d(self.distributions),
                "user_attrs": d(self.user_attrs),
                "system_attrs": d(self.system_attrs),
                "intermediate": [[s, v] for s, v in self.intermediate.items()],
                "suggestion_id": self.suggestion_id,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> "Trial":
        d = json.loads(text)
        values = d.get("values")
        return cls(
            int(d["trial_id"]),
            int(d["number"]),
            d["state"],
            None if values is None else tuple(float(v) for v in values),
            d.get("datetime_start", ""),
            d.get("datetime_complete", ""),
            {k: float(v) for k, v in d.get("params", {}).items()},
            d.get("distributions", {}),
            d.get("user_attrs", {}),
            d.get("system_attrs", {}),
            {int(s): float(v) for s, v in d.get("intermediate", [])},
            d.get("suggestion_id"),
        )


# -- the changes and reads a door sends (one message type carries them) --------------


@dataclass(frozen=True)
class NewTrial:
    """A trial: RUNNING now (template None), or a copy of `template` (its state,
    parameters, values, attributes; its id and number are the study's to give)."""

    template: Trial | None = None


@dataclass(frozen=True)
class SetParam:
    trial_id: int
    name: str
    value: float
    distribution: str


@dataclass(frozen=True)
class SetState:
    """Answers whether the trial changed: False for RUNNING asked of a trial not WAITING."""

    trial_id: int
    state: str
    values: tuple[float, ...] | None = None


@dataclass(frozen=True)
class SetIntermediate:
    trial_id: int
    step: int
    value: float


@dataclass(frozen=True)
class SetTrialAttr:
    trial_id: int
    system: bool
    key: str
    value: str  # JSON text


@dataclass(frozen=True)
class SetStudyAttr:
    system: bool
    key: str
    value: str  # JSON text


@dataclass(frozen=True)
class DeleteStudy:
    pass


@dataclass(frozen=True)
class ReadStudy:
    pass


@dataclass(frozen=True)
class ReadTrial:
    trial_id: int


@dataclass(frozen=True)
class ReadTrials:
    """Trials with an id above `greater_than` or in `included`, by number."""

    greater_than: int = -1
    included: frozenset[int] = frozenset()


@dataclass(frozen=True)
class TrialIdOf:
    number: int


TrialChange = (
    NewTrial | SetParam | SetState | SetIntermediate | SetTrialAttr | SetStudyAttr | DeleteStudy
    | ReadStudy | ReadTrial | ReadTrials | TrialIdOf
)  # fmt: skip
READS = (ReadStudy, ReadTrial, ReadTrials, TrialIdOf)  # the changes that change nothing


def _open_study(study: Study | None) -> Study:
    if study is None or study.deleted:
        raise api_error("not_found", "no study in this experiment (it was deleted, or made by another door)")
    return study


def _number(study: Study, count: int, trial_id: int) -> int:
    """The number of the trial `trial_id` among the study's `count`; not_found if none."""
    number = trial_id - (study.study_id << TRIAL_ID_BITS)
    if study_of(trial_id) != study.study_id or not 0 <= number < count:
        raise _trial_not_found(trial_id)
    return number


def _read(study: Study, trials: Sequence[Trial], change: TrialChange) -> Any:
    """A read's answer (`READS`) from a study and its trials by number."""
    match change:
        case ReadStudy():
            return study
        case ReadTrial():
            return trials[_number(study, len(trials), change.trial_id)]
        case ReadTrials():
            # ids are base + number: those above greater_than are a tail of the numbers,
            # so a read costs the trials it answers, not the study's whole history
            base = study.study_id << TRIAL_ID_BITS
            start = min(max(0, change.greater_than - base + 1), len(trials))
            below = sorted(i - base for i in change.included if base <= i < base + start)
            return [trials[n] for n in below] + list(trials[start:])
        case TrialIdOf():
            if not 0 <= change.number < len(trials):
                raise api_error("not_found", f"no trial number {change.number} in study {study.study_id}")
            return trials[change.number].trial_id
    raise invalid(f"not a read: {type(change).__name__}")


class _Doors(Sequence[Trial]):
    """The live trials by number, as `_read` takes them (each record's `door`)."""

    __slots__ = ("_numbered",)

    def __init__(self, numbered: list[TrialRecord]) -> None:
        self._numbered = numbered

    def __len__(self) -> int:
        return len(self._numbered)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [r.door for r in self._numbered[i]]
        return self._numbered[i].door


class CommittedTrials:
    """A study and its trials as of the actor's last committed write: what a read shows.
    A write is acknowledged only once committed, so a read answered from here shows
    every acknowledged write and never one a crash could undo, whatever is in flight.

    The actor publishes each commit's study and changed trials once it is committed
    (`publish`, on the loop's thread, in commit order). `read` may run on any thread
    (a gRPC handler thread answers reads without crossing to the loop): it reads
    references only, under the GIL, and a read that overlapped a publish (the version
    moved) is made again, so it answers one committed state, never a mix of two."""

    __slots__ = ("_gap", "_study", "_trials", "_version")

    def __init__(self, study: Study | None, trials: Sequence[Trial]) -> None:
        self._study = study
        self._trials = list(trials)
        self._version = 0  # odd while a publish runs
        self._gap = False  # a trial was published before one made earlier: reads go to the actor

    def publish(self, study: Study | None, changed: Sequence[Trial]) -> None:
        """The state after a commit: the study, and the trials it made or changed (by number).
        Commits land in the order they were made; were one to land before an earlier one,
        this state would have a hole, and every later read is left to the actor."""
        self._version += 1
        try:
            self._study = study
            trials = self._trials
            for t in changed:
                if t.number < len(trials):
                    trials[t.number] = t
                elif t.number == len(trials):
                    trials.append(t)
                else:
                    self._gap = True
        finally:
            self._version += 1

    @property
    def study(self) -> Study | None:
        return self._study

    def read(self, change: TrialChange) -> Any:
        """The answer to a read (`READS`) from the committed state; NOT_NOW if publishes
        kept overlapping it (the caller asks the actor instead)."""
        for _ in range(_READ_TRIES):
            version = self._version
            if self._gap:
                break
            if not version & 1:
                answer = _read(_open_study(self._study), self._trials, change)
                if self._version == version:
                    return answer
        return NOT_NOW


_READ_TRIES = 3


class TrialBook:
    """A study and its trials. `apply(change, now)` answers (result, records to store)."""

    def __init__(self, records: Sequence[tuple[str, str]]) -> None:
        self.study: Study | None = None
        self.records = TrialSet()
        self._changed: set[int] = set()  # numbers of the trials made or changed since `take_changes`
        trials: list[Trial] = []
        for key, body in records:
            if key == STUDY_KEY:
                self.study = Study.from_json(body)
            elif key.startswith("trial/"):
                trials.append(Trial.from_json(body))
        trials.sort(key=lambda t: t.number)
        for t in trials:
            self._add(t)
        self._changed.clear()

    def doors(self) -> list[Trial]:
        """Every trial, by number."""
        return [r.door for r in self.records.numbered]

    def take_changes(self) -> list[Trial]:
        """The trials made or changed since the last call, by number (what a commit publishes)."""
        if not self._changed:
            return []
        numbered = self.records.numbered
        changed = [numbered[n].door for n in sorted(self._changed)]
        self._changed.clear()
        return changed

    def live(self) -> list[Trial]:
        """The trials waiting or running, by number."""
        return [r.door for r in self.records.live()]

    def apply(self, change: TrialChange, now: float) -> tuple[Any, list[tuple[str, str]]]:
        study = _open_study(self.study)
        match change:
            case ReadStudy() | ReadTrial() | ReadTrials() | TrialIdOf():
                return _read(study, _Doors(self.records.numbered), change), []
            case NewTrial():
                return self._new_trial(study, change.template, now)
            case SetParam():
                return self._set_param(study, change)
            case SetState():
                return self._set_state(change, now)
            case SetIntermediate():
                t = self._writable(change.trial_id)
                if change.step not in t.intermediate and len(t.intermediate) >= MAX_STEPS:
                    raise invalid(f"intermediate values: at most {MAX_STEPS} steps per trial")
                return None, self._put(replace(t, intermediate={**t.intermediate, change.step: change.value}))
            case SetTrialAttr():
                t = self._writable(change.trial_id)
                key, value = check_key("key", change.key), check_attr("value", change.value)
                self._check_room(t.user_attrs, t.system_attrs, key)
                if change.system:
                    return None, self._put(replace(t, system_attrs={**t.system_attrs, key: value}))
                return None, self._put(replace(t, user_attrs={**t.user_attrs, key: value}))
            case SetStudyAttr():
                key, value = check_key("key", change.key), check_attr("value", change.value)
                self._check_room(study.user_attrs, study.system_attrs, key)
                if change.system:
                    self.study = replace(study, system_attrs={**study.system_attrs, key: value})
                else:
                    self.study = replace(study, user_attrs={**study.user_attrs, key: value})
                return None, [(STUDY_KEY, self.study.to_json())]
            case DeleteStudy():
                self.study = replace(study, deleted=True)
                return None, [(STUDY_KEY, self.study.to_json())]
        raise invalid(f"unknown trial change {type(change).__name__}")

    def touched(self, change: TrialChange, result: Any) -> Trial | None:
        """The trial `change` (applied, answering `result`) created or changed, if any."""
        if isinstance(change, NewTrial):
            return self._trial(result)
        if isinstance(change, (SetParam, SetIntermediate)) or (isinstance(change, SetState) and result is True):
            return self._trial(change.trial_id)
        return None

    def link(self, t: Trial, suggestion_id: str) -> tuple[str, str]:
        """Record which suggestion of the experiment the trial is; its record."""
        t = replace(t, suggestion_id=suggestion_id)
        self._put(t)
        self.records.numbered[t.number].suggestion_id = suggestion_id
        return t.key(), t.to_json()

    def mark(self, t: Trial, key: str, value: str) -> tuple[str, str]:
        """Set a system attribute the engine decides (not a worker's write); its record."""
        t = self.records.numbered[t.number].door
        t = replace(t, system_attrs={**t.system_attrs, key: value})
        self._put(t)
        return t.key(), t.to_json()

    def start(self, study: Study) -> list[tuple[str, str]]:
        """The study's first record (the experiment was just made for it)."""
        self.study = study
        return [(STUDY_KEY, study.to_json())]

    # -- helpers -----------------------------------------------------------------

    @staticmethod
    def _check_room(user: Mapping[str, str], system: Mapping[str, str], key: str) -> None:
        if key not in user and key not in system and len(user) + len(system) >= MAX_ATTRS:
            raise invalid(f"attributes: at most {MAX_ATTRS} per study or trial")

    def _trial(self, trial_id: int) -> Trial:
        assert self.study is not None
        t: Trial = self.records.numbered[_number(self.study, len(self.records.numbered), trial_id)].door
        return t

    def _writable(self, trial_id: int) -> Trial:
        t = self._trial(trial_id)
        if t.finished:
            raise _finished_error(t)
        return t

    def _add(self, t: Trial) -> None:
        """A trial joins the lifecycle's set (numbered next: its number)."""
        r = TrialRecord(str(t.trial_id), t.suggestion_id, {}, _LIFE[t.state], door=t)
        self.records.add(r)
        assert r.number == t.number
        self._changed.add(t.number)

    def _put(self, t: Trial) -> list[tuple[str, str]]:
        """The trial's new view (its state unchanged); its record."""
        self.records.numbered[t.number].door = t
        self._changed.add(t.number)
        return [(t.key(), t.to_json())]

    def _new_trial(self, study: Study, template: Trial | None, now: float) -> tuple[int, list[tuple[str, str]]]:
        number = len(self.records.numbered)
        if number >= MAX_TRIALS:
            raise invalid(f"study {study.study_id} has {MAX_TRIALS} trials, the most one study holds")
        trial_id = (study.study_id << TRIAL_ID_BITS) | number
        if template is None:
            t = Trial(trial_id, number, "RUNNING", datetime_start=_stamp(now))
        else:
            t = replace(template, trial_id=trial_id, number=number)
        self._add(t)
        if t.state == "RUNNING":
            self.records.numbered[number].claimed_at = now
        records = [(t.key(), t.to_json())]
        added = {k: v for k, v in t.distributions.items() if k not in study.distributions}
        if added:
            self.study = replace(study, distributions={**study.distributions, **added})
            records.append((STUDY_KEY, self.study.to_json()))
        return trial_id, records

    def _set_param(self, study: Study, change: SetParam) -> tuple[None, list[tuple[str, str]]]:
        t = self._writable(change.trial_id)  # a finished trial answers so before its distribution is read
        name = check_key("param_name", change.name)
        new = Distribution.parse(change.distribution)
        if not math.isfinite(change.value) and new.choices is not None:
            raise invalid(f"parameter {name!r}: {change.value!r} is not a choice index")
        new.check_value(change.value, name)
        old = study.distributions.get(name)
        if old is not None:
            Distribution.parse(old).check_compatible(new, name)
        if name not in t.params and len(t.params) >= MAX_PARAMS:
            raise invalid(f"parameters: at most {MAX_PARAMS} per trial")
        records: list[tuple[str, str]] = []
        if old != change.distribution:
            self.study = replace(study, distributions={**study.distributions, name: change.distribution})
            records.append((STUDY_KEY, self.study.to_json()))
        t = replace(
            t,
            params={**t.params, name: change.value},
            distributions={**t.distributions, name: change.distribution},
        )
        return None, records + self._put(t)

    def _set_state(self, change: SetState, now: float) -> tuple[bool, list[tuple[str, str]]]:
        t = self._writable(change.trial_id)
        if change.state not in TRIAL_STATES:
            raise invalid(f"state: {change.state!r} is not one of {list(TRIAL_STATES)}")
        r, state = self.records.numbered[t.number], _LIFE[change.state]
        if state == "running":
            if not self.records.claim(r, None, now):
                return False, []  # a claim someone else won, or a trial already running
        elif state == "waiting":
            self.records.requeue(r)
        else:
            self.records.finish(r, state)
        start = _stamp(now) if change.state == "RUNNING" else t.datetime_start
        complete = _stamp(now) if change.state in FINISHED else t.datetime_complete
        values = t.values if change.values is None else change.values
        t = replace(t, state=change.state, values=values, datetime_start=start, datetime_complete=complete)
        return True, self._put(t)


def _stamp(now: float) -> str:
    # DATETIME_FORMAT, written by isoformat (a fraction of strftime's cost)
    return datetime.fromtimestamp(now).isoformat(" ", "microseconds")


def check_directions(directions: Sequence[str]) -> tuple[str, ...]:
    if not directions or any(d not in DIRECTIONS for d in directions):
        raise invalid(f"directions: give one or more of {list(DIRECTIONS)}")
    return tuple(directions)


# -- what the other doors see: a trial as a suggestion, finished as its observation -------


@dataclass(frozen=True)
class Mirrored:
    """A finished trial as an observation: its parameters' external values, the first
    objective's value, the other objectives as metrics. PRUNED reads as stopped at its
    last reported step, without a value (as in Optuna, a pruned trial is never the best);
    FAIL, or a value that is not finite, as failed."""

    assignments: dict[str, Any]
    value: float | None
    failed: bool
    metrics: dict[str, float]
    stopped_at_step: int | None


def external_value(distribution: str, internal: float) -> Any:
    """A parameter's value as the user wrote it: a categorical's choice, an int, or the float."""
    kind, choices = _kind_of(distribution)
    if choices is not None:
        return choices[int(internal)]
    if kind == "int":
        return int(internal)
    return internal


@_by_text
def _kind_of(distribution: str) -> tuple[str, tuple[Any, ...] | None]:
    """A stored distribution's kind, and a categorical's choices."""
    raw = json.loads(distribution)
    kind, _ = _DISTRIBUTIONS[raw["name"]]
    return kind, tuple(raw["attributes"]["choices"]) if kind == "categorical" else None


def assignments_of(t: Trial) -> dict[str, Any]:
    return {name: external_value(t.distributions[name], v) for name, v in t.params.items()}


def mirrored(t: Trial, metric_names: Sequence[str]) -> Mirrored:
    assignments = assignments_of(t)
    values = t.values or ()
    if t.state == "PRUNED":
        return Mirrored(assignments, None, False, {}, max(t.intermediate) if t.intermediate else None)
    if t.state != "COMPLETE" or len(values) < len(metric_names) or not all(map(math.isfinite, values)):
        return Mirrored(assignments, None, True, {}, None)
    return Mirrored(assignments, values[0], False, dict(zip(metric_names[1:], values[1:])), None)


def parameter_of(name: str, distribution: str) -> dict[str, Any] | None:
    """The tauopt parameter a trial's first distribution of `name` declares (None: no such
    parameter, e.g. a choice that is neither text, number nor bool)."""
    raw = json.loads(distribution)
    kind, log = _DISTRIBUTIONS[raw["name"]]
    attrs = raw["attributes"]
    if kind == "categorical":
        choices = attrs["choices"]
        if not all(isinstance(c, (str, int, float, bool)) for c in choices) or len(set(map(repr, choices))) != len(choices):
            return None
        return {"name": name, "type": "categorical", "values": choices}
    out: dict[str, Any] = {"name": name, "type": "int" if kind == "int" else "double"}
    out["bounds"] = [attrs["low"], attrs["high"]]
    if bool(attrs.get("log", False)) if log is None else log:
        out["scale"] = "log"
    step = attrs.get("step", attrs.get("q"))
    if step is not None and not (kind == "int" and step == 1):
        out["step"] = step
    return out
