"""An unmodified Optuna program: only its storage line names the tauopt daemon.

    python worker.py MODE HOST PORT STUDY [N] [SEED]

tpe: N trials of a 3-parameter objective with TPE, report/should_prune and a MedianPruner;
tauopt: the same with tauopt's TauoptSampler (a Client() from TAUOPT_BASE_URL, TAUOPT_TOKEN);
pruned: the tpe objective with tauopt's TauoptPruner (the one line that names tauopt's
rule, the study's `tauopt:early_stopping` says which); multi: N trials of a two-objective study; best: print the best trial; hang: start a
trial and wait to be killed. Prints one JSON line (the trial numbers it ran, or the best).
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import optuna
from optuna.storages import GrpcStorageProxy

warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
optuna.logging.set_verbosity(optuna.logging.WARNING)

mode, host, port, name = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
n = int(sys.argv[5]) if len(sys.argv) > 5 else 0
seed = int(sys.argv[6]) if len(sys.argv) > 6 else 0
storage = GrpcStorageProxy(host=host, port=port)
ran: list[int] = []


def objective(trial: optuna.Trial) -> float:
    ran.append(trial.number)
    x = trial.suggest_float("x", -5.0, 5.0)
    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    kind = trial.suggest_categorical("kind", ["a", "b", "c"])
    loss = (x - 1.0) ** 2 + (0.5 if kind == "b" else 1.0) + lr
    for step in range(4):
        trial.report(loss + 1.0 / (step + 1), step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return loss


def two_objectives(trial: optuna.Trial) -> tuple[float, float]:
    ran.append(trial.number)
    x = trial.suggest_float("x", 0.0, 1.0)
    y = trial.suggest_int("y", 1, 8)
    return x + y, (1.0 - x) * y


if mode == "tpe":
    pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1)
    study = optuna.load_study(study_name=name, storage=storage, sampler=optuna.samplers.TPESampler(seed=seed), pruner=pruner)
    study.optimize(objective, n_trials=n)
    print(json.dumps({"ran": ran}))
elif mode == "tauopt":
    from tauopt import Client
    from tauopt.integrations.optuna import TauoptSampler

    study = optuna.load_study(study_name=name, storage=storage, sampler=TauoptSampler(Client(), seed=seed))
    study.optimize(objective, n_trials=n)
    print(json.dumps({"ran": ran}))
elif mode == "pruned":
    from tauopt.integrations.optuna import TauoptPruner

    study = optuna.load_study(study_name=name, storage=storage, sampler=optuna.samplers.TPESampler(seed=seed), pruner=TauoptPruner())
    study.optimize(objective, n_trials=n)
    print(json.dumps({"ran": ran}))
elif mode == "multi":
    study = optuna.load_study(study_name=name, storage=storage, sampler=optuna.samplers.RandomSampler(seed=seed))
    study.optimize(two_objectives, n_trials=n)
    print(json.dumps({"ran": ran, "pareto": sorted(t.number for t in study.best_trials)}))
elif mode == "best":
    best = optuna.load_study(study_name=name, storage=storage).best_trial
    print(json.dumps({"number": best.number, "value": best.value, "params": best.params}))
elif mode == "hang":
    trial = optuna.load_study(study_name=name, storage=storage).ask()
    trial.suggest_float("x", -5.0, 5.0)
    print(json.dumps({"number": trial.number}), flush=True)
    time.sleep(600)
