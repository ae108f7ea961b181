"""An Optuna program of tests/test_grpc_relay.py: ask and tell N trials of one study
through GrpcStorageProxy on one daemon's Optuna door, riding through another daemon's
death with a user's retry loop (Optuna's client retries nothing); each told trial is
printed as a JSON line once its tell was acknowledged.

    python failover.py HOST PORT STUDY N SEED
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import grpc
import optuna
from optuna.storages import GrpcStorageProxy

warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
optuna.logging.set_verbosity(optuna.logging.WARNING)

host, port, name, n, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
storage = GrpcStorageProxy(host=host, port=port)
study = optuna.load_study(study_name=name, storage=storage, sampler=optuna.samplers.RandomSampler(seed=seed))
deadline = time.monotonic() + 90
told = 0
while told < n:
    assert time.monotonic() < deadline, "no progress"
    try:
        trial = study.ask()
        x = trial.suggest_float("x", 0.0, 1.0)
    except grpc.RpcError as exc:  # the call's daemon lost its answer (a relay's owner died): ask again
        assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
        time.sleep(0.1)
        continue
    value = x * x
    while True:
        try:
            study.tell(trial, value)
            break
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc
            time.sleep(0.1)
            try:  # the lost tell may have landed
                if storage.get_trial(trial._trial_id).state.is_finished():
                    break
            except grpc.RpcError:
                pass
    told += 1
    print(json.dumps({"number": trial.number, "trial_id": trial._trial_id, "value": value, "t": time.time()}), flush=True)
