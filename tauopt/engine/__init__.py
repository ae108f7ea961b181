"""The engine: Engine (front door) and ExperimentActor (one per experiment).

Stores live in `tauopt.store` (re-exported here for callers of the engine);
the SQLite store is imported only when a path is given.
"""

from ..store import (
    CredentialRecord,
    MemoryStore,
    PutCredential,
    PutExperiment,
    PutObservation,
    PutSuggestion,
    RevokeCredential,
    Snapshot,
    Store,
    StoreError,
    open_store,
)
from ._admin import Admin, ExperimentReport, Transfer, open_admin, run_admin
from ._engine import UNSET, Engine
from ._growth import Learned, assignments_for, default_value, merge_space
from ._lifecycle import Brackets, BracketRun, SearchFailed, TrialInfo
from ._trialqueue import STOPPED, TrialPolicy, TrialQueue
from ._trials import (
    TRIAL_STATES,
    DeleteStudy,
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
    TrialChange,
    TrialIdOf,
    check_attr,
    check_datetime,
    check_key,
)

__all__ = [
    "Engine",
    # the trial lifecycle both trial-based doors share (_lifecycle.py); the policy of a door
    # whose workers claim trials (KerasTuner's), see _trialqueue.py
    "TrialQueue",
    "TrialPolicy",
    "TrialInfo",
    "Brackets",
    "BracketRun",
    "SearchFailed",
    "STOPPED",
    "Learned",
    "merge_space",
    "assignments_for",
    "default_value",
    # studies and trials of a trial-based door (Optuna's model), see _trials.py
    "TRIAL_STATES",
    "DeleteStudy",
    "Distribution",
    "NewTrial",
    "ReadStudy",
    "ReadTrial",
    "ReadTrials",
    "SetIntermediate",
    "SetParam",
    "SetState",
    "SetStudyAttr",
    "SetTrialAttr",
    "Study",
    "Trial",
    "TrialChange",
    "TrialIdOf",
    "check_attr",
    "check_datetime",
    "check_key",
    "UNSET",
    "Admin",
    "ExperimentReport",
    "Transfer",
    "open_admin",
    "run_admin",
    "open_store",
    "Store",
    "MemoryStore",
    "StoreError",
    "Snapshot",
    "PutExperiment",
    "PutSuggestion",
    "PutObservation",
    "PutCredential",
    "RevokeCredential",
    "CredentialRecord",
]
