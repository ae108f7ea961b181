"""Translators from the training loops people already run to the public client.

Each submodule imports its library (install the matching extra) and nothing else
of tauopt than the public `Client` API, so `import tauopt` stays light:

- `tauopt.integrations.ray`: `TauoptSearch`, a Ray Tune `Searcher` (extra `ray`);
- `tauopt.integrations.keras`: `TauoptCallback` for `model.fit` (keras 3);
- `tauopt.integrations.lightning`: `TauoptCallback` for a `lightning` Trainer
  (extra `lightning`).

`TrialRun` (in `_trial`) is the one place where a training run's reports, its
stop decision and its single final observation are kept; every integration
drives one per suggestion.
"""

from __future__ import annotations

from ._trial import MissingMetricError, TrialRun

__all__ = ["MissingMetricError", "TrialRun"]
