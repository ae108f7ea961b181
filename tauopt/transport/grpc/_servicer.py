"""`keras_tuner.Oracle` over grpc.aio: translation only, errors through the catalogue.

Every request is parsed completely before the oracle is called, so malformed
input answers INVALID_ARGUMENT and changes nothing. Responses carry values
typed by their parameter and no space (workers register their own), except
GetSpace, whose space obeys every KerasTuner parsing rule.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Awaitable, Callable, TypeVar

import grpc

from ...errors import invalid
from .._rpc import OnRpc, answer_rpc
from ._convert import MAX_NAME, Learned, fill_values, hyperparameters_to_proto, space_from_proto, values_from_proto
from ._generated import keras_tuner_pb2 as kt
from ._generated import service_pb2 as pb
from ._generated import service_pb2_grpc as pb_grpc
from ._oracle import KerasTunerOracle, SearchFailed, TrialView

__all__ = ["OracleServicer", "trial_to_proto", "MAX_MESSAGE_BYTES"]

log = logging.getLogger("tauopt.kerastuner")

MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # gRPC's default, and what a worker accepts
_MAX_METRICS = 1_000
_TRIAL_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
# KerasTuner infers a metric's direction from its name when it is not the objective.
_MAXIMIZED = ("acc", "auc", "precision", "recall", "f1", "iou", "r2", "top_k")

T = TypeVar("T")


def _maximized(oracle: KerasTunerOracle, name: str) -> bool:
    if name == oracle.config.objective:
        return oracle.maximize
    listed = dict(oracle.config.objectives)  # an objective list names each metric's direction
    if name in listed:
        return listed[name] == "max"
    return any(k in name.lower() for k in _MAXIMIZED) and "loss" not in name.lower()


_STATUS_OUT = {name: kt.TrialStatus.Value(name) for name in kt.TrialStatus.keys()}
_STATUS_IN = {number: name for name, number in _STATUS_OUT.items()}


def trial_to_proto(view: TrialView, oracle: KerasTunerOracle) -> kt.Trial:
    trial = kt.Trial(trial_id=view.trial_id, status=_STATUS_OUT[view.status])
    fill_values(trial.hyperparameters.values, view.values, oracle.space)
    for name, history in view.metrics.items():
        mh = trial.metrics.metrics[name]
        mh.maximize = _maximized(oracle, name)
        for step, values in history:
            mh.observations.add(value=list(values), step=step)
    if view.score is not None and view.status == "COMPLETED":
        trial.score.value = view.score
        trial.score.step = view.best_step
    return trial


def _trial_id(raw: str) -> str:
    if not _TRIAL_ID.match(raw):
        raise invalid(f"trial_id: {raw[:40]!r} is not a trial id this chief hands out")
    return raw




_LEARNED_CACHE = 64  # distinct spaces remembered (workers of one search send one or a few)


class OracleServicer(pb_grpc.OracleServicer):
    def __init__(self, oracle: KerasTunerOracle, on_rpc: OnRpc | None = None) -> None:
        self.oracle = oracle
        self.on_rpc = on_rpc
        self._learned: dict[bytes, Learned] = {}

    def _space_from_proto(self, space: kt.HyperParameters.Space) -> Learned:
        """`space_from_proto`, parsed once per distinct space: a worker sends its whole
        space with every EndTrial, and it seldom changes (`Learned` is immutable)."""
        key = space.SerializeToString()
        learned = self._learned.get(key)
        if learned is None:
            learned = space_from_proto(space)  # raises on a malformed space: nothing is cached
            if len(self._learned) >= _LEARNED_CACHE:
                del self._learned[next(iter(self._learned))]
            self._learned[key] = learned
        return learned

    async def _call(self, context: grpc.aio.ServicerContext, rpc: str, fn: Callable[[], Awaitable[T]]) -> T:
        self.oracle.heard()
        try:
            return await answer_rpc(
                context, rpc, fn, on_rpc=self.on_rpc, log=log, other={SearchFailed: ("ABORTED", "search_failed")}
            )
        finally:
            self.oracle.heard()

    async def GetSpace(self, request: pb.GetSpaceRequest, context: Any) -> pb.GetSpaceResponse:
        async def run() -> pb.GetSpaceResponse:
            hp = hyperparameters_to_proto(self.oracle.default_values(), self.oracle.space, with_space=True)
            return pb.GetSpaceResponse(hyperparameters=hp)

        return await self._call(context, "GetSpace", run)

    async def UpdateSpace(self, request: pb.UpdateSpaceRequest, context: Any) -> pb.UpdateSpaceResponse:
        async def run() -> pb.UpdateSpaceResponse:
            learned = self._space_from_proto(request.hyperparameters.space)
            await self.oracle.update_space(learned)
            return pb.UpdateSpaceResponse()

        return await self._call(context, "UpdateSpace", run)

    async def CreateTrial(self, request: pb.CreateTrialRequest, context: Any) -> pb.CreateTrialResponse:
        async def run() -> pb.CreateTrialResponse:
            view = await self.oracle.create_trial(request.tuner_id)
            return pb.CreateTrialResponse(trial=trial_to_proto(view, self.oracle))

        return await self._call(context, "CreateTrial", run)

    async def UpdateTrial(self, request: pb.UpdateTrialRequest, context: Any) -> pb.UpdateTrialResponse:
        async def run() -> pb.UpdateTrialResponse:
            trial_id = _trial_id(request.trial_id)
            metrics = dict(request.metrics)
            if len(metrics) > _MAX_METRICS:
                raise invalid(f"metrics: {len(metrics)} metrics; at most {_MAX_METRICS}")
            for name in metrics:
                if not name or len(name) > MAX_NAME or not name.isprintable():
                    raise invalid(f"metrics: names must be 1-{MAX_NAME} printable characters")
            view = await self.oracle.update_trial(trial_id, metrics, int(request.step))
            return pb.UpdateTrialResponse(trial=trial_to_proto(view, self.oracle))

        return await self._call(context, "UpdateTrial", run)

    async def EndTrial(self, request: pb.EndTrialRequest, context: Any) -> pb.EndTrialResponse:
        async def run() -> pb.EndTrialResponse:
            trial = request.trial
            trial_id = _trial_id(trial.trial_id)
            status = _STATUS_IN.get(trial.status) or str(trial.status)
            values = values_from_proto(trial.hyperparameters.values)
            space = trial.hyperparameters.space
            learned = self._space_from_proto(space) if trial.hyperparameters.HasField("space") else None
            await self.oracle.end_trial(trial_id, status, values, learned)
            return pb.EndTrialResponse()

        return await self._call(context, "EndTrial", run)

    async def GetBestTrials(self, request: pb.GetBestTrialsRequest, context: Any) -> pb.GetBestTrialsResponse:
        async def run() -> pb.GetBestTrialsResponse:
            views = await self.oracle.best_trials(int(request.num_trials))
            response = pb.GetBestTrialsResponse()
            budget = MAX_MESSAGE_BYTES - 64 * 1024  # stay under the worker's receive limit
            for view in views:
                trial = trial_to_proto(view, self.oracle)
                budget -= trial.ByteSize() + 8
                if budget < 0:
                    break
                response.trials.append(trial)
            return response

        return await self._call(context, "GetBestTrials", run)

    async def GetTrial(self, request: pb.GetTrialRequest, context: Any) -> pb.GetTrialResponse:
        async def run() -> pb.GetTrialResponse:
            view = await self.oracle.get_trial(_trial_id(request.trial_id))
            return pb.GetTrialResponse(trial=trial_to_proto(view, self.oracle))

        return await self._call(context, "GetTrial", run)
