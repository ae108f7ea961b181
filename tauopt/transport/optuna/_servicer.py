"""Optuna's `optuna.StorageService`: translation only, errors through the catalogue.

The methods are coroutines in grpc.aio's form, run on the engine's event loop (the
door serves them from grpc's thread-pool server, `transport/_threaded.py`). The reads
of trials and studies are answered first on gRPC's handler thread (`inline`), from
what the study's actor has committed, and only when the engine cannot answer them
there (no live actor yet, a read with effects, an error to word) on the loop.

Each call becomes one engine call on the door's credential (`Engine.as_owner`): a study
is an experiment, its trials are changed and read in the experiment's actor
(`tauopt.engine._trials`). Errors map to the status codes Optuna's client turns into
the exceptions its own server would cause: `not_found` -> NOT_FOUND (KeyError),
`name_taken` -> ALREADY_EXISTS (DuplicatedStudyError), `trial_finished` ->
FAILED_PRECONDITION (UpdateFinishedTrialError), `invalid_request` -> INVALID_ARGUMENT
(ValueError); the rest reach the user as the catalogue's status.
"""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import Any, Awaitable, Callable, Mapping, TypeVar

import grpc

from ...actors import NOT_NOW
from ...engine import (
    TRIAL_STATES,
    Distribution,
    NewTrial,
    ReadStudy,
    ReadTrial,
    ReadTrials,
    SetIntermediate,
    SetParam,
    SetState,
    SetStudyAttr,
    SetTrialAttr,
    Study,
    Trial,
    TrialIdOf,
    check_attr,
    check_datetime,
    check_key,
)
from ...errors import ApiError, api_error, invalid
from .._rpc import OnRpc, answer_rpc, length_delimited
from ._door import MAX_MESSAGE_BYTES, MAX_STUDIES
from ._generated import api_pb2 as pb
from ._generated import api_pb2_grpc as pb_grpc

__all__ = ["StorageServicer", "EncodedTrials", "MAX_MESSAGE_BYTES"]

log = logging.getLogger("tauopt.optuna")

MAX_INCLUDED_IDS = 1_000_000  # unfinished trial ids one GetTrials may name
ENCODED_TRIALS = 20_000  # trials whose wire bytes are kept (each about a few hundred bytes)

T = TypeVar("T")
Inline = Callable[[Any], Any]  # a request -> its reply, or None: answered on the loop instead
_SERVICE = pb.DESCRIPTOR.services_by_name["StorageService"].full_name

_STATE_OUT = {name: pb.TrialState.Value(name) for name in TRIAL_STATES}
_STATE_IN = {number: name for name, number in _STATE_OUT.items()}
_DIRECTION_OUT = {"MINIMIZE": pb.MINIMIZE, "MAXIMIZE": pb.MAXIMIZE}
_DIRECTION_IN = {number: name for name, number in _DIRECTION_OUT.items()}

# Each study read's reply, built from the study alike on the loop and on a handler thread.
_STUDY_REPLIES: dict[str, Callable[[Study], Any]] = {
    "GetStudyNameFromId": lambda s: pb.GetStudyNameFromIdReply(study_name=s.name),
    "GetStudyDirections": lambda s: pb.GetStudyDirectionsReply(directions=[_DIRECTION_OUT[d] for d in s.directions]),
    "GetStudyUserAttributes": lambda s: pb.GetStudyUserAttributesReply(user_attributes=dict(s.user_attrs)),
    "GetStudySystemAttributes": lambda s: pb.GetStudySystemAttributesReply(system_attributes=dict(s.system_attrs)),
}


def _state(number: int) -> str:
    name = _STATE_IN.get(number)
    if name is None:
        raise invalid(f"state: {number} is not one of Optuna's trial states")
    return name


def _attrs(where: str, given: Mapping[str, str]) -> dict[str, str]:
    return {check_key(where, k): check_attr(f"{where}[{k[:40]!r}]", v) for k, v in given.items()}


def _trials_read(request: pb.GetTrialsRequest) -> ReadTrials:
    """GetTrials' read: the trials above the largest finished id the client saw, and the
    unfinished ones it names (at most MAX_INCLUDED_IDS)."""
    if len(request.included_trial_ids) > MAX_INCLUDED_IDS:
        raise invalid(f"included_trial_ids: at most {MAX_INCLUDED_IDS}")
    return ReadTrials(request.trial_id_greater_than, frozenset(request.included_trial_ids))


def trial_to_proto(t: Trial) -> pb.Trial:
    return pb.Trial(
        trial_id=t.trial_id,
        number=t.number,
        state=_STATE_OUT[t.state],
        values=t.values or (),
        datetime_start=t.datetime_start,
        datetime_complete=t.datetime_complete,
        params=dict(t.params),
        distributions=dict(t.distributions),
        user_attributes=dict(t.user_attrs),
        system_attributes=dict(t.system_attrs),
        intermediate_values=dict(t.intermediate),
    )


class EncodedTrials:
    """Each trial's wire form, encoded once per version of the trial. Every worker's
    GetTrials names every unfinished trial it has seen, and reads each finished one once,
    so one version of a trial goes out many times: it is encoded once and the replies
    are joined from the bytes. A version is the trial object itself (the engine replaces
    a trial's object when the trial changes); the oldest entries go past `size`."""

    def __init__(self, size: int = ENCODED_TRIALS) -> None:
        self._size = size
        self._by_id: dict[int, tuple[Trial, bytes]] = {}
        self._lock = threading.Lock()  # called on the loop and on gRPC's handler threads

    def __call__(self, t: Trial) -> bytes:
        """`t` as field 1 of GetTrialReply and GetTrialsReply (the trial, the trials)."""
        hit = self._by_id.get(t.trial_id)
        if hit is not None and hit[0] is t:
            return hit[1]
        encoded = length_delimited(1, trial_to_proto(t).SerializeToString())
        with self._lock:
            by_id = self._by_id
            if by_id.pop(t.trial_id, None) is None and len(by_id) >= self._size:
                del by_id[next(iter(by_id))]
            by_id[t.trial_id] = (t, encoded)  # (re-)inserted last: the newest version is the last to go
        return encoded


def trial_from_proto(p: pb.Trial) -> Trial:
    """A template trial (enqueue_trial, add_trial, copy_study), checked whole."""
    if set(p.params) - set(p.distributions):
        raise invalid("template_trial: every parameter needs its distribution")
    for name, text in p.distributions.items():
        check_key("template_trial.distributions", name)
        Distribution.parse(text)
    return Trial(
        trial_id=-1,
        number=-1,
        state=_state(p.state),
        values=tuple(p.values) or None,
        datetime_start=check_datetime("datetime_start", p.datetime_start),
        datetime_complete=check_datetime("datetime_complete", p.datetime_complete),
        params=dict(p.params),
        distributions=dict(p.distributions),
        user_attrs=_attrs("user_attributes", p.user_attributes),
        system_attrs=_attrs("system_attributes", p.system_attributes),
        intermediate=dict(p.intermediate_values),
    )


def study_to_proto(s: Study) -> pb.Study:
    return pb.Study(
        study_id=s.study_id,
        study_name=s.name,
        directions=[_DIRECTION_OUT[d] for d in s.directions],
        user_attributes=dict(s.user_attrs),
        system_attributes=dict(s.system_attrs),
    )


class StorageServicer(pb_grpc.StorageServiceServicer):
    """`engine`: the engine as the door's credential (`Engine.as_owner`)."""

    def __init__(self, engine: Any, on_rpc: OnRpc | None = None, max_studies: int = MAX_STUDIES) -> None:
        self.engine = engine
        self.on_rpc = on_rpc
        self.max_studies = max_studies
        self.encoded = EncodedTrials()

    def inline(self) -> dict[str, Inline]:
        """The reads answered on gRPC's handler thread, by full method name: each takes the
        request and answers its reply, or None when the engine cannot answer it at once
        (`Engine.study_read_now`); the call then runs on the loop as the others do."""
        reads: dict[str, Inline] = {
            "GetTrial": self._get_trial_now,
            "GetTrials": self._get_trials_now,
            "GetTrialIdFromStudyIdTrialNumber": self._trial_id_now,
            **{rpc: partial(self._study_now, reply=reply) for rpc, reply in _STUDY_REPLIES.items()},
        }
        return {f"/{_SERVICE}/{rpc}": self._counted(rpc, read) for rpc, read in reads.items()}

    def _counted(self, rpc: str, read: Inline) -> Inline:
        on_rpc = self.on_rpc

        def answer(request: Any) -> Any:
            t0 = time.perf_counter()
            try:
                reply = read(request)
            except ApiError:  # bad input: the loop's path words the error
                return None
            except Exception:  # a bug: the loop's path answers the call (and says so)
                log.exception("%s on the handler thread failed", rpc)
                return None
            if reply is not None and on_rpc is not None:
                on_rpc(rpc, "OK", "ok", time.perf_counter() - t0)
            return reply

        return answer

    def _get_trial_now(self, request: pb.GetTrialRequest) -> bytes | None:
        found = self.engine.trial_read_now(request.trial_id, ReadTrial(request.trial_id))
        return None if found is NOT_NOW else self.encoded(found)

    def _get_trials_now(self, request: pb.GetTrialsRequest) -> bytes | None:
        found = self.engine.study_read_now(request.study_id, _trials_read(request))
        return None if found is NOT_NOW else b"".join(map(self.encoded, found))

    def _trial_id_now(self, request: pb.GetTrialIdFromStudyIdTrialNumberRequest) -> Any:
        found = self.engine.study_read_now(request.study_id, TrialIdOf(request.trial_number))
        return None if found is NOT_NOW else pb.GetTrialIdFromStudyIdTrialNumberReply(trial_id=found)

    def _study_now(self, request: Any, reply: Callable[[Study], Any]) -> Any:
        found = self.engine.study_read_now(request.study_id, ReadStudy())
        return None if found is NOT_NOW else reply(found)

    async def _call(self, context: Any, rpc: str, fn: Callable[[], Awaitable[T]]) -> T:
        # not_found and name_taken are ordinary answers here (load_if_exists, a lookup)
        return await answer_rpc(context, rpc, fn, on_rpc=self.on_rpc, log=log, error_level=logging.DEBUG)

    # -- studies ---------------------------------------------------------------

    async def CreateNewStudy(self, request: pb.CreateNewStudyRequest, context: Any) -> pb.CreateNewStudyReply:
        async def run() -> pb.CreateNewStudyReply:
            directions = [_DIRECTION_IN.get(d) for d in request.directions]
            if None in directions or not directions:
                raise invalid("directions: give MINIMIZE or MAXIMIZE for each objective")
            if self.engine.study_count() >= self.max_studies:
                raise api_error(
                    "active_experiment_cap", f"{self.max_studies} studies exist for this door; delete some first"
                )
            study_id = await self.engine.create_study(request.study_name, directions)
            return pb.CreateNewStudyReply(study_id=study_id)

        return await self._call(context, "CreateNewStudy", run)

    async def DeleteStudy(self, request: pb.DeleteStudyRequest, context: Any) -> pb.DeleteStudyReply:
        async def run() -> pb.DeleteStudyReply:
            await self.engine.delete_study(request.study_id)
            return pb.DeleteStudyReply()

        return await self._call(context, "DeleteStudy", run)

    async def SetStudyUserAttribute(
        self, request: pb.SetStudyUserAttributeRequest, context: Any
    ) -> pb.SetStudyUserAttributeReply:
        async def run() -> pb.SetStudyUserAttributeReply:
            await self.engine.study_call(request.study_id, SetStudyAttr(False, request.key, request.value))
            return pb.SetStudyUserAttributeReply()

        return await self._call(context, "SetStudyUserAttribute", run)

    async def SetStudySystemAttribute(
        self, request: pb.SetStudySystemAttributeRequest, context: Any
    ) -> pb.SetStudySystemAttributeReply:
        async def run() -> pb.SetStudySystemAttributeReply:
            await self.engine.study_call(request.study_id, SetStudyAttr(True, request.key, request.value))
            return pb.SetStudySystemAttributeReply()

        return await self._call(context, "SetStudySystemAttribute", run)

    async def GetStudyIdFromName(self, request: pb.GetStudyIdFromNameRequest, context: Any) -> pb.GetStudyIdFromNameReply:
        async def run() -> pb.GetStudyIdFromNameReply:
            return pb.GetStudyIdFromNameReply(study_id=await self.engine.study_id(request.study_name))

        return await self._call(context, "GetStudyIdFromName", run)

    async def _study(self, study_id: int) -> Study:
        study: Study = await self.engine.study_call(study_id, ReadStudy())
        return study

    async def _study_reply(self, rpc: str, request: Any, context: Any) -> Any:
        """A study read on the loop: the same reply `inline` builds on a handler thread."""

        async def run() -> Any:
            return _STUDY_REPLIES[rpc](await self._study(request.study_id))

        return await self._call(context, rpc, run)

    async def GetStudyNameFromId(self, request: pb.GetStudyNameFromIdRequest, context: Any) -> pb.GetStudyNameFromIdReply:
        return await self._study_reply("GetStudyNameFromId", request, context)

    async def GetStudyDirections(self, request: pb.GetStudyDirectionsRequest, context: Any) -> pb.GetStudyDirectionsReply:
        return await self._study_reply("GetStudyDirections", request, context)

    async def GetStudyUserAttributes(
        self, request: pb.GetStudyUserAttributesRequest, context: Any
    ) -> pb.GetStudyUserAttributesReply:
        return await self._study_reply("GetStudyUserAttributes", request, context)

    async def GetStudySystemAttributes(
        self, request: pb.GetStudySystemAttributesRequest, context: Any
    ) -> pb.GetStudySystemAttributesReply:
        return await self._study_reply("GetStudySystemAttributes", request, context)

    async def GetAllStudies(self, request: pb.GetAllStudiesRequest, context: Any) -> pb.GetAllStudiesReply:
        async def run() -> pb.GetAllStudiesReply:
            return pb.GetAllStudiesReply(studies=[study_to_proto(s) for s in await self.engine.studies()])

        return await self._call(context, "GetAllStudies", run)

    # -- trials ------------------------------------------------------------------

    async def CreateNewTrial(self, request: pb.CreateNewTrialRequest, context: Any) -> pb.CreateNewTrialReply:
        async def run() -> pb.CreateNewTrialReply:
            template = None if request.template_trial_is_none else trial_from_proto(request.template_trial)
            trial_id = await self.engine.study_call(request.study_id, NewTrial(template))
            return pb.CreateNewTrialReply(trial_id=trial_id)

        return await self._call(context, "CreateNewTrial", run)

    async def SetTrialParameter(self, request: pb.SetTrialParameterRequest, context: Any) -> pb.SetTrialParameterReply:
        async def run() -> pb.SetTrialParameterReply:
            change = SetParam(request.trial_id, request.param_name, request.param_value_internal, request.distribution)
            await self.engine.trial_call(request.trial_id, change)
            return pb.SetTrialParameterReply()

        return await self._call(context, "SetTrialParameter", run)

    async def GetTrialIdFromStudyIdTrialNumber(
        self, request: pb.GetTrialIdFromStudyIdTrialNumberRequest, context: Any
    ) -> pb.GetTrialIdFromStudyIdTrialNumberReply:
        async def run() -> pb.GetTrialIdFromStudyIdTrialNumberReply:
            trial_id = await self.engine.study_call(request.study_id, TrialIdOf(request.trial_number))
            return pb.GetTrialIdFromStudyIdTrialNumberReply(trial_id=trial_id)

        return await self._call(context, "GetTrialIdFromStudyIdTrialNumber", run)

    async def SetTrialStateValues(
        self, request: pb.SetTrialStateValuesRequest, context: Any
    ) -> pb.SetTrialStateValuesReply:
        async def run() -> pb.SetTrialStateValuesReply:
            values = tuple(request.values) or None  # empty means none, as Optuna's server reads it
            change = SetState(request.trial_id, _state(request.state), values)
            return pb.SetTrialStateValuesReply(trial_updated=await self.engine.trial_call(request.trial_id, change))

        return await self._call(context, "SetTrialStateValues", run)

    async def SetTrialIntermediateValue(
        self, request: pb.SetTrialIntermediateValueRequest, context: Any
    ) -> pb.SetTrialIntermediateValueReply:
        async def run() -> pb.SetTrialIntermediateValueReply:
            change = SetIntermediate(request.trial_id, request.step, request.intermediate_value)
            await self.engine.trial_call(request.trial_id, change)
            return pb.SetTrialIntermediateValueReply()

        return await self._call(context, "SetTrialIntermediateValue", run)

    async def SetTrialUserAttribute(
        self, request: pb.SetTrialUserAttributeRequest, context: Any
    ) -> pb.SetTrialUserAttributeReply:
        async def run() -> pb.SetTrialUserAttributeReply:
            await self.engine.trial_call(request.trial_id, SetTrialAttr(request.trial_id, False, request.key, request.value))
            return pb.SetTrialUserAttributeReply()

        return await self._call(context, "SetTrialUserAttribute", run)

    async def SetTrialSystemAttribute(
        self, request: pb.SetTrialSystemAttributeRequest, context: Any
    ) -> pb.SetTrialSystemAttributeReply:
        async def run() -> pb.SetTrialSystemAttributeReply:
            await self.engine.trial_call(request.trial_id, SetTrialAttr(request.trial_id, True, request.key, request.value))
            return pb.SetTrialSystemAttributeReply()

        return await self._call(context, "SetTrialSystemAttribute", run)

    # GetTrial and GetTrials answer their reply's bytes (the door's serializer passes bytes on)

    async def GetTrial(self, request: pb.GetTrialRequest, context: Any) -> bytes:
        async def run() -> bytes:
            return self.encoded(await self.engine.trial_call(request.trial_id, ReadTrial(request.trial_id)))

        return await self._call(context, "GetTrial", run)

    async def GetTrials(self, request: pb.GetTrialsRequest, context: Any) -> bytes:
        async def run() -> bytes:
            trials = await self.engine.study_call(request.study_id, _trials_read(request))
            return b"".join(map(self.encoded, trials))

        return await self._call(context, "GetTrials", run)

