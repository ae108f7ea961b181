"""`TauoptSampler`: Optuna's relative sampling answered by a tauopt experiment;
`TauoptPruner`: tauopt's early-stopping decisions for a study stored by `tauopt serve`.

Each Optuna study gets one tauopt experiment (its relative search space as the
parameters, its directions as the objectives). A trial's relative parameters are a
tauopt suggestion: every trial still running holds one open, so tauopt's strategies
count it as pending, and asks never wait for a fit to finish elsewhere. When the
trial finishes, its values are observed (COMPLETE), or it is recorded failed (FAIL)
or closed (PRUNED: its point may be suggested again). Parameters outside the
relative space, and every parameter while the space is still being learned (the
first trial), come from the independent sampler, as Optuna's own samplers do.

Works with any Optuna storage (the experiment's id is kept in the study's system
attributes, so every process of a study shares it) and any tauopt client: in process
(`Client(driver="local")`, the default) or over HTTP (`Client(base_url=..., token=...)`).

`TauoptPruner` reads the decision the daemon's Optuna door writes into a trial's
system attributes (`tauopt:should_stop`) when the study's early-stopping rule (the
study user attribute `tauopt:early_stopping`) stops it; a trial without one is
judged by the pruner it wraps (none: it continues).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.pruners import BasePruner
from optuna.samplers import BaseSampler, RandomSampler
from optuna.search_space import IntersectionSearchSpace
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from ..client import Client
from ..errors import ApiError

__all__ = ["TauoptSampler", "TauoptPruner"]

_EXPERIMENT_KEY = "tauopt:experiment_id"
_SUGGESTION_KEY = "tauopt:suggestion_id"
_SHOULD_STOP_KEY = "tauopt:should_stop"  # the door's decision (tauopt.engine._trials.SHOULD_STOP_KEY)


def _metric_names(n: int) -> list[str]:
    return ["value"] if n == 1 else [f"value{i}" for i in range(n)]


def parameter_for(name: str, d: BaseDistribution) -> dict[str, Any] | None:
    """The tauopt parameter of an Optuna distribution (None: tauopt has no such parameter)."""
    if isinstance(d, CategoricalDistribution):
        if all(isinstance(c, (str, int, float, bool)) for c in d.choices):
            return {"name": name, "type": "categorical", "values": list(d.choices)}
        return None
    if isinstance(d, (FloatDistribution, IntDistribution)):
        if d.low == d.high:
            return None
        out: dict[str, Any] = {"name": name, "type": "int" if isinstance(d, IntDistribution) else "double"}
        out["bounds"] = [d.low, d.high]
        if d.log:
            out["scale"] = "log"
        if d.step is not None and not (isinstance(d, IntDistribution) and d.step == 1):
            out["step"] = d.step
        return out
    return None


class TauoptSampler(BaseSampler):
    """An Optuna sampler whose relative sampling asks tauopt for the next point.

    client: a `tauopt.Client` (default: an in-process engine of its own).
    strategy: the experiment's strategy ("auto", "gp", "sobol", "random", ...).
    independent_sampler: for parameters outside the relative space (default: RandomSampler(seed)).
    suggestion_ttl_s: a dead worker's suggestion returns after this long.
    """

    def __init__(
        self,
        client: Client | None = None,
        *,
        strategy: str = "auto",
        seed: int | None = None,
        independent_sampler: BaseSampler | None = None,
        suggestion_ttl_s: float | None = 3600.0,
        parallel_bandwidth: int = 1024,
    ) -> None:
        self._client = client if client is not None else Client(driver="local")
        self._strategy = strategy
        self._seed = seed
        self._independent = independent_sampler or RandomSampler(seed=seed)
        self._space = IntersectionSearchSpace()
        self._ttl = suggestion_ttl_s
        self._bandwidth = parallel_bandwidth
        self._experiments: dict[int, tuple[str, tuple[str, ...]]] = {}

    def reseed_rng(self) -> None:
        self._independent.reseed_rng()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        space = self._space.calculate(study)
        return {n: d for n, d in space.items() if parameter_for(n, d) is not None}

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        experiment_id = self._experiment(study, search_space)
        if experiment_id is None:
            return {}
        s = self._client.suggest(experiment_id, tag=f"trial-{trial.number}")
        study._storage.set_trial_system_attr(trial._trial_id, _SUGGESTION_KEY, f"{experiment_id}/{s.id}")
        out = {}
        for name, d in search_space.items():
            v = s.assignments.get(name)
            if v is not None and d._contains(d.to_internal_repr(v)):
                out[name] = int(v) if isinstance(d, IntDistribution) else v
        return out

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self._independent.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(
        self, study: Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        held = trial.system_attrs.get(_SUGGESTION_KEY)
        if held is None:
            return
        experiment_id, suggestion_id = held.split("/", 1)
        try:
            if state == TrialState.COMPLETE and values is not None and all(map(math.isfinite, values)):
                names = _metric_names(len(values))
                self._client.observe(experiment_id, suggestion_id, values=dict(zip(names, values)))
            elif state == TrialState.FAIL or state == TrialState.COMPLETE:
                self._client.observe(experiment_id, suggestion_id, failed=True)
            else:
                self._client.close_suggestion(experiment_id, suggestion_id)
        except ApiError as exc:
            if exc.error_type not in ("suggestion_expired", "suggestion_observed", "suggestion_closed"):
                raise

    # -- the study's experiment -------------------------------------------------------

    def _experiment(self, study: Study, space: dict[str, BaseDistribution]) -> str | None:
        """The study's experiment over `space` (made, or extended by new parameters);
        None when the space changed a parameter tauopt cannot change."""
        names = tuple(sorted(space))
        known = self._experiments.get(study._study_id)
        if known is None:
            experiment_id = study._storage.get_study_system_attrs(study._study_id).get(_EXPERIMENT_KEY)
            if experiment_id is None:
                experiment_id = self._create(study, space)
            known = (experiment_id, tuple(sorted(p.name for p in self._client.experiment(experiment_id).parameters)))
            self._experiments[study._study_id] = known
        experiment_id, have = known
        if set(names) <= set(have):
            return experiment_id
        wanted = [parameter_for(n, space[n]) for n in names]
        current = [p.to_dict() for p in self._client.experiment(experiment_id).parameters]
        added = [p for p in wanted if p is not None and p["name"] not in have]
        try:
            self._client.update_experiment(experiment_id, parameters=[*current, *added])
        except ApiError:
            return None
        self._experiments[study._study_id] = (experiment_id, tuple(sorted([*have, *(p["name"] for p in added)])))
        return experiment_id

    def _create(self, study: Study, space: dict[str, BaseDistribution]) -> str:
        directions = study.directions
        names = _metric_names(len(directions))
        metrics = [
            {"name": n, "objective": "maximize" if d == StudyDirection.MAXIMIZE else "minimize"}
            for n, d in zip(names, directions)
        ]
        exp = self._client.create_experiment(
            name=f"optuna {study.study_name}"[:256],
            parameters=[p for n in sorted(space) if (p := parameter_for(n, space[n])) is not None],
            metrics=metrics,
            strategy=self._strategy,
            strategy_options={"seed": self._seed} if self._seed is not None else None,
            parallel_bandwidth=self._bandwidth,
            suggestion_ttl_s=self._ttl,
        )
        study._storage.set_study_system_attr(study._study_id, _EXPERIMENT_KEY, exp.id)
        # another process may have made one meanwhile: the first one recorded wins
        chosen: str = study._storage.get_study_system_attrs(study._study_id).get(_EXPERIMENT_KEY, exp.id)
        if chosen != exp.id:
            self._client.archive_experiment(exp.id)
        return chosen


class TauoptPruner(BasePruner):
    """An Optuna pruner that prunes a trial once tauopt's early-stopping rule stopped it.

    The daemon decides as intermediate values arrive through its Optuna door (the
    study opts in with the user attribute `tauopt:early_stopping`, e.g.
    `{"rule": "median", "min_trials": 5}`) and writes the decision into the trial's
    system attributes, which `prune` reads through the study's storage.
    `fallback`: the pruner judging a trial tauopt has not stopped (default: none, it
    continues), e.g. for a study without a tauopt rule or a storage that is not the door.
    """

    def __init__(self, fallback: BasePruner | None = None) -> None:
        self._fallback = fallback

    def prune(self, study: Study, trial: FrozenTrial) -> bool:
        if _SHOULD_STOP_KEY in trial.system_attrs:
            return True
        return self._fallback.prune(study, trial) if self._fallback is not None else False
