"""The Optuna door answers each call as Optuna's own proxy server does: the exceptions
Optuna's client raises, the claim of a WAITING trial won once, attributes returned as
the exact text sent, ids never reused, limits. A real `tauopt serve --optuna-port`."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest

from test_http_daemon import Daemon
from test_http_support import free_port

optuna = pytest.importorskip("optuna")
grpc = pytest.importorskip("grpc")

from tauopt.transport.optuna._generated import api_pb2 as pb  # noqa: E402
from tauopt.transport.optuna._generated import api_pb2_grpc as pb_grpc  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")]

FLOAT = json.dumps({"name": "FloatDistribution", "attributes": {"low": 0.0, "high": 1.0, "log": False, "step": None}})
LOG_FLOAT = json.dumps({"name": "FloatDistribution", "attributes": {"low": 0.1, "high": 1.0, "log": True, "step": None}})
MAX_STUDIES = 12


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, int]]:
    port = free_port()
    d = Daemon(tmp_path_factory.mktemp("door") / "tauopt.db", "--optuna-port", str(port),
               "--optuna-max-studies", str(MAX_STUDIES))  # fmt: skip
    yield d, port
    if d.proc.poll() is None:
        d.stop()


@pytest.fixture
def storage(door: tuple[Daemon, int]) -> Any:
    from optuna.storages import GrpcStorageProxy

    return GrpcStorageProxy(host="127.0.0.1", port=door[1])


@pytest.fixture
def stub(door: tuple[Daemon, int]) -> Iterator[Any]:
    with grpc.insecure_channel(f"127.0.0.1:{door[1]}") as channel:
        yield pb_grpc.StorageServiceStub(channel)


def _study(storage: Any, name: str, directions: Any = None) -> int:
    from optuna.study import StudyDirection

    return storage.create_new_study(directions or [StudyDirection.MINIMIZE], name)


def test_errors_raise_what_optunas_own_server_makes_the_client_raise(storage: Any) -> None:
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.exceptions import DuplicatedStudyError, UpdateFinishedTrialError
    from optuna.trial import TrialState

    sid = _study(storage, "errors")
    with pytest.raises(DuplicatedStudyError):
        _study(storage, "errors")
    for call in (lambda: storage.get_study_id_from_name("nope"), lambda: storage.get_study_name_from_id(10**9),
                 lambda: storage.get_all_trials(10**9), lambda: storage.get_trial(10**12),
                 lambda: storage.create_new_trial(10**9), lambda: storage.delete_study(10**9),
                 lambda: storage.get_trial_id_from_study_id_trial_number(sid, 5)):  # fmt: skip
        with pytest.raises(KeyError):
            call()
    tid = storage.create_new_trial(sid)
    storage.set_trial_param(tid, "x", 0.5, FloatDistribution(0, 1))
    with pytest.raises(ValueError):  # same name, another kind of distribution
        storage.set_trial_param(tid, "x", 0, CategoricalDistribution(["a"]))
    with pytest.raises(ValueError):
        storage.set_trial_param(tid, "y", 7, CategoricalDistribution(["a", "b"]))  # not a choice index
    assert storage.set_trial_state_values(tid, TrialState.COMPLETE, [1.0])
    with pytest.raises(UpdateFinishedTrialError):  # finished is checked before the distribution
        storage.set_trial_param(tid, "x", 0, CategoricalDistribution(["a"]))
    for call in (lambda: storage.set_trial_state_values(tid, TrialState.FAIL),
                 lambda: storage.set_trial_intermediate_value(tid, 1, 0.5),
                 lambda: storage.set_trial_user_attr(tid, "k", 1),
                 lambda: storage.set_trial_system_attr(tid, "k", 1)):  # fmt: skip
        with pytest.raises(UpdateFinishedTrialError):
            call()


def test_bad_input_answers_invalid_argument_and_changes_nothing(stub: Any, storage: Any) -> None:
    sid = _study(storage, "bad-input")
    tid = stub.CreateNewTrial(pb.CreateNewTrialRequest(study_id=sid, template_trial_is_none=True)).trial_id
    bad = [
        pb.SetTrialParameterRequest(trial_id=tid, param_name="x", param_value_internal=0.5, distribution="{not json"),
        pb.SetTrialParameterRequest(trial_id=tid, param_name="x", param_value_internal=0.5, distribution='{"name": "Nope"}'),
        pb.SetTrialUserAttributeRequest(trial_id=tid, key="k", value="not json"),
        pb.SetTrialUserAttributeRequest(trial_id=tid, key="k", value='"' + "x" * (2 * 1024 * 1024) + '"'),
    ]
    calls = [stub.SetTrialParameter, stub.SetTrialParameter, stub.SetTrialUserAttribute, stub.SetTrialUserAttribute]
    for call, request in zip(calls, bad):
        with pytest.raises(grpc.RpcError) as caught:
            call(request)
        assert caught.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)
    trial = stub.GetTrial(pb.GetTrialRequest(trial_id=tid)).trial
    assert not trial.params and not trial.user_attributes and trial.state == pb.RUNNING


def test_attributes_come_back_as_the_exact_json_text_sent(stub: Any, storage: Any) -> None:
    sid = _study(storage, "attrs")
    texts = {"a": "NaN", "b": "[Infinity, -Infinity, 1.0]", "c": '{"k":  "v" }', "d": '"\\u00e9"'}
    tid = stub.CreateNewTrial(pb.CreateNewTrialRequest(study_id=sid, template_trial_is_none=True)).trial_id
    for key, text in texts.items():
        stub.SetStudyUserAttribute(pb.SetStudyUserAttributeRequest(study_id=sid, key=key, value=text))
        stub.SetTrialSystemAttribute(pb.SetTrialSystemAttributeRequest(trial_id=tid, key=key, value=text))
    assert dict(stub.GetStudyUserAttributes(pb.GetStudyUserAttributesRequest(study_id=sid)).user_attributes) == texts
    assert dict(stub.GetTrial(pb.GetTrialRequest(trial_id=tid)).trial.system_attributes) == texts


def test_a_waiting_trial_is_claimed_by_exactly_one_of_many_workers(stub: Any, storage: Any) -> None:
    sid = _study(storage, "claim")
    template = pb.Trial(state=pb.WAITING, system_attributes={"fixed_params": '{"x": 0.5}'})
    tid = stub.CreateNewTrial(pb.CreateNewTrialRequest(study_id=sid, template_trial=template)).trial_id
    claim = pb.SetTrialStateValuesRequest(trial_id=tid, state=pb.RUNNING)
    with ThreadPoolExecutor(16) as pool:
        won = list(pool.map(lambda _: stub.SetTrialStateValues(claim).trial_updated, range(16)))
    assert won.count(True) == 1
    trial = stub.GetTrial(pb.GetTrialRequest(trial_id=tid)).trial
    assert trial.state == pb.RUNNING and trial.datetime_start


def test_tauopts_rule_marks_the_trials_it_stops_and_leaves_pruned_curves_out_of_the_median(stub: Any, storage: Any) -> None:
    from optuna.trial import TrialState

    sid = _study(storage, "rule")
    storage.set_study_user_attr(sid, "tauopt:early_stopping", {"rule": "median", "min_trials": 1})

    def run(value: float, end: TrialState) -> Any:
        tid = storage.create_new_trial(sid)
        storage.set_trial_param(tid, "x", 0.5, optuna.distributions.FloatDistribution(0.0, 1.0))
        storage.set_trial_intermediate_value(tid, 0, value)
        trial = storage.get_trial(tid)
        storage.set_trial_state_values(tid, end, [value] if end == TrialState.COMPLETE else None)
        return trial.system_attrs.get("tauopt:should_stop")

    assert run(1.0, TrialState.COMPLETE) is None  # nothing to compare with yet
    assert run(10.0, TrialState.PRUNED)["step"] == 0  # worse than the median (1.0): stopped, and pruned
    # a pruned curve is not a completed one: the median is still 1.0 (with the pruned 10.0 it would be 5.5)
    assert run(4.0, TrialState.COMPLETE) is not None
    storage.set_study_user_attr(sid, "tauopt:early_stopping", None)  # null: no rule
    assert run(50.0, TrialState.COMPLETE) is None
    with pytest.raises(grpc.RpcError) as err:
        stub.SetStudyUserAttribute(pb.SetStudyUserAttributeRequest(study_id=sid, key="tauopt:early_stopping", value='{"rule": "x"}'))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_ids_increase_across_studies_and_a_deleted_studys_id_is_never_given_again(stub: Any, storage: Any) -> None:
    a = _study(storage, "ids-a")
    b = _study(storage, "")  # an empty name is a name
    trials = [storage.create_new_trial(s) for s in (a, b, a, b)]
    assert len(set(trials)) == 4 and trials[2] > trials[0] and trials[3] > trials[1]
    assert storage.get_study_name_from_id(b) == "" and storage.get_study_id_from_name("") == b
    storage.delete_study(b)
    c = _study(storage, "")
    assert c > b
    names = [s.study_name for s in storage.get_all_studies()]
    assert names.index("ids-a") < names.index("")
    # the incremental fetch: only trials above the id given, plus the ones named
    fetched = stub.GetTrials(pb.GetTrialsRequest(study_id=a, trial_id_greater_than=trials[0])).trials
    assert [t.trial_id for t in fetched] == [trials[2]]


def test_the_doors_calls_are_counted_by_method_at_metrics(door: tuple[Daemon, int], storage: Any) -> None:
    import httpx

    _study(storage, "counted")
    with pytest.raises(KeyError):
        storage.get_study_id_from_name("not-there")
    text = httpx.get(door[0].url + "/metrics").text
    assert 'tauopt_grpc_requests_total{code="OK",method="CreateNewStudy"}' in text
    assert 'tauopt_grpc_requests_total{code="NOT_FOUND",method="GetStudyIdFromName"}' in text


def test_a_flood_of_studies_stops_at_the_cap_with_resource_exhausted(stub: Any, storage: Any) -> None:
    made = len(storage.get_all_studies())
    for i in range(MAX_STUDIES - made):
        _study(storage, f"flood-{i}")
    with pytest.raises(grpc.RpcError) as caught:
        _study(storage, "one-too-many")
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_binding_beyond_loopback_needs_an_explicit_flag(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "tauopt.cli", "serve", "--db", str(tmp_path / "x.db"), "--optuna-port", "0",
         "--optuna-host", "0.0.0.0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "--optuna-allow-remote" in r.stderr and "no authentication" in r.stderr
    assert not (tmp_path / "x.db").exists()


def test_studies_and_trials_survive_a_restart_of_the_daemon(tmp_path: Path) -> None:
    from optuna.storages import GrpcStorageProxy

    port, db = free_port(), tmp_path / "tauopt.db"
    d = Daemon(db, "--optuna-port", str(port))
    try:
        study = optuna.create_study(study_name="durable", storage=GrpcStorageProxy(host="127.0.0.1", port=port))
        study.set_user_attr("s", [1, "two"])
        study.enqueue_trial({"x": 0.25})
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
        before = [(t.number, t.state, t.values, t.params, t.system_attrs, t.datetime_complete) for t in study.trials]
    finally:
        assert d.stop()[0] == 0
    d = Daemon(db, "--optuna-port", str(port))
    try:
        again = optuna.load_study(study_name="durable", storage=GrpcStorageProxy(host="127.0.0.1", port=port))
        after = [(t.number, t.state, t.values, t.params, t.system_attrs, t.datetime_complete) for t in again.trials]
        assert after == before and again.user_attrs == {"s": [1, "two"]}
        again.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
        assert [t.number for t in again.trials] == [0, 1, 2, 3]
    finally:
        d.stop()
