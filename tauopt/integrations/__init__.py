"""Translators from the libraries and training loops people already run to the public client.

Each submodule imports its library (install the matching extra) and nothing else
of tauopt than the public API, so `import tauopt` stays light:

- `tauopt.integrations.optuna`: `TauoptSampler`, an Optuna sampler that asks tauopt
  (extra `optuna`);
- `tauopt.integrations.ray`: `TauoptSearch`, a Ray Tune `Searcher` (extra `ray`);
- `tauopt.integrations.keras`: `TauoptCallback` for `model.fit` (keras 3);
- `tauopt.integrations.lightning`: `TauoptCallback` for a `lightning` Trainer
  (extra `lightning`).

`TrialRun` (in `_trial`) is the one place where a training run's reports, its
stop decision and its single final observation are kept; every callback and the
Ray searcher drive one per suggestion.
"""

from __future__ import annotations

from ._trial import MissingMetricError, TrialRun

__all__ = ["MissingMetricError", "TrialRun"]
