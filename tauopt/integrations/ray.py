"""`TauoptSearch`: a Ray Tune `Searcher` backed by a tauopt experiment (extra `ray`).

What maps to what: a Tune trial is a suggestion tagged with the trial id; each
result the trial reports is a `report` at its `training_iteration`; the trial's
end is an observation (its last value of `metric`, `stopped=True` when tauopt's
rule told it to stop) and a trial error is a failed observation. Tune asks again
later when the experiment's `parallel_bandwidth` is full; `ConcurrencyLimiter`'s
limit becomes the bandwidth of an experiment this searcher creates.

tauopt's early-stopping decisions reach Tune through `searcher.stopper()` (a Tune
`Stopper`, given as `RunConfig(stop=...)`); Ray's own schedulers work as usual.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Mapping
from typing import Any

from ray.tune.search import Searcher
from ray.tune.search.sample import Categorical, Domain, Float, Integer, LogUniform, Quantized, Uniform
from ray.tune.search.variant_generator import parse_spec_vars
from ray.tune.stopper import Stopper
from ray.tune.utils.util import flatten_dict, unflatten_dict

from .. import ApiError, Client
from ._trial import MissingMetricError, TrialRun, metric_value

__all__ = ["MissingMetricError", "TauoptSearch", "TauoptStopper", "parameters_from_ray_space"]

log = logging.getLogger(__name__)

ClientOrFactory = Client | Callable[[], Client]
# the experiment cannot hand out more: Tune's search is finished
_FINISHED = ("experiment_completed", "space_exhausted", "experiment_archived")
_OBJECTIVE = {"min": "minimize", "max": "maximize"}


def _parameter(name: str, domain: Domain) -> dict[str, Any]:
    sampler = domain.get_sampler()
    step = None
    if isinstance(sampler, Quantized):
        step, sampler = sampler.q, sampler.sampler
    scale = "log" if isinstance(sampler, LogUniform) else "linear" if isinstance(sampler, Uniform) else None
    if isinstance(domain, Categorical) and scale == "linear":
        return {"name": name, "type": "categorical", "values": list(domain.categories)}
    if isinstance(domain, (Float, Integer)) and scale is not None:
        is_int = isinstance(domain, Integer)
        # Tune's randint/lograndint exclude the upper bound (qrandint includes it); tauopt's bounds are inclusive
        upper = domain.upper - 1 if is_int and step is None else domain.upper
        p: dict[str, Any] = {"name": name, "type": "int" if is_int else "double", "bounds": (domain.lower, upper), "scale": scale}
        if step is not None:
            p["step"] = step
        return p
    raise ValueError(
        f"search space entry {name!r}: {type(domain).__name__} sampled by {type(sampler).__name__} has no tauopt "
        "parameter; use tune.uniform/loguniform/quniform, tune.randint/lograndint/qrandint or tune.choice"
    )


def parameters_from_ray_space(space: Mapping[str, Any]) -> list[dict[str, Any]]:
    """tauopt parameters for the sampled entries of a Tune search space; nested
    dicts become names joined by "/" (as Tune's own searchers name them). Constants
    stay in Tune's config; grid_search and sample_from have no tauopt equivalent."""
    _, domains, grid = parse_spec_vars(dict(space))
    if grid:
        raise ValueError("tune.grid_search has no tauopt equivalent: use tune.choice (tauopt's grid strategy is strategy='grid')")
    flat = flatten_dict(dict(space), prevent_delimiter=True)
    _, domains, _ = parse_spec_vars(flat)
    return [_parameter("/".join(path), domain) for path, domain in domains]


class TauoptSearch(Searcher):
    """A Ray Tune searcher over a tauopt experiment.

    `TauoptSearch(client=..., experiment_id=..., metric=..., mode=...)` joins an
    existing experiment (`metric` defaults to its metric's name, `mode` to its
    direction); `TauoptSearch(space=..., metric=..., mode=..., client=...)`, or no
    `space` and Tune's `param_space`, creates one at the first use (`name`,
    `early_stopping`, `strategy`, `parallel_bandwidth` as in `create_experiment`).

    `client` is a `tauopt.Client` or a function returning one (e.g.
    `functools.partial(tauopt.Client, driver="http", base_url=...)`); None is
    `tauopt.Client()`, the HTTP driver when `TAUOPT_BASE_URL` is set. Tune pickles
    its searcher with the run: a factory (or None) lets `Tuner.restore` reconnect
    and continue the same experiment; a client object is not pickled.
    """

    def __init__(
        self,
        space: Mapping[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        *,
        client: ClientOrFactory | None = None,
        experiment_id: str | None = None,
        name: str = "ray-tune",
        early_stopping: Mapping[str, Any] | None = None,
        strategy: str = "auto",
        parallel_bandwidth: int | None = None,
    ) -> None:
        if space is not None and experiment_id is not None:
            raise ValueError("pass space= to create an experiment or experiment_id= to join one, not both")
        super().__init__(metric=metric, mode=mode)
        self._metric: str | None = metric
        self._mode: str | None = mode
        self._factory: Callable[[], Client] | None = Client if client is None else None if isinstance(client, Client) else client
        self._client: Client | None = client if isinstance(client, Client) else None
        self._space = dict(space) if space is not None else None
        self.experiment_id = experiment_id
        self._joined = experiment_id is not None
        self._name, self._strategy = name, strategy
        self._early_stopping = dict(early_stopping) if early_stopping else None
        self._bandwidth = parallel_bandwidth
        self._runs: dict[str, TrialRun] = {}
        self._checked = False

    # -- the client and the experiment -------------------------------------------

    @property
    def client(self) -> Client:
        if self._client is None:
            if self._factory is None:
                raise RuntimeError(
                    "this TauoptSearch was restored without its client (a Client object is not pickled "
                    "with the Tune run); construct it with client= a function returning a tauopt.Client"
                )
            self._client = self._factory()
        return self._client

    def _experiment(self) -> str:
        if self.experiment_id is None:
            if self._space is None:
                raise ValueError("TauoptSearch has no space: pass space=, Tuner's param_space, or experiment_id=")
            if self._metric is None or self._mode not in _OBJECTIVE:
                raise ValueError("TauoptSearch needs metric= and mode='min' or 'max' to create an experiment (Tune passes "
                    "TuneConfig's only with a param_space; with space= pass them to TauoptSearch)")
            exp = self.client.create_experiment(
                self._name, parameters_from_ray_space(self._space), {"name": self._metric, "objective": _OBJECTIVE[self._mode]},
                parallel_bandwidth=self._bandwidth or _cluster_cpus(), strategy=self._strategy, early_stopping=self._early_stopping,
            )  # fmt: skip
            self.experiment_id = exp.id
        elif not self._checked:
            self._join(self.experiment_id)
        self._checked = True
        return self.experiment_id

    def _join(self, experiment_id: str) -> None:
        exp = self.client.experiment(experiment_id)
        mode = "min" if exp.metric.objective == "minimize" else "max"
        if self._mode is not None and self._mode != mode:
            raise ValueError(f"mode={self._mode!r} but experiment {experiment_id} is to {exp.metric.objective} {exp.metric.name!r}")
        self._metric = self._metric or exp.metric.name
        self._mode = mode

    # -- Searcher ------------------------------------------------------------------

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any) -> bool:
        has_space = self._space is not None or self.experiment_id is not None
        if has_space and parse_spec_vars(config)[1]:
            return False  # Tune says: the space is the searcher's, not param_space's
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        if not has_space and config:
            self._space = dict(config)
        return True

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """ConcurrencyLimiter's limit becomes the created experiment's `parallel_bandwidth`
        (a joined experiment keeps its own, shared with its other workers); the limiter
        still counts this run's trials, so Tune does not ask while they fill it."""
        if not self._joined:
            if self.experiment_id is not None and self._bandwidth != max_concurrent:
                self.client.update_experiment(self.experiment_id, parallel_bandwidth=max_concurrent)
            self._bandwidth = max_concurrent
        return False

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        eid = self._experiment()
        try:
            s = self.client.suggest(eid, tag=trial_id, deadline_s=0)  # a full bandwidth answers now, not after retries
        except ApiError as e:
            if e.error_type == "bandwidth_full":
                return None  # Tune asks again when a trial ends
            if e.error_type in _FINISHED:
                return Searcher.FINISHED
            raise
        self._runs[trial_id] = TrialRun(self.client, eid, s.id)
        return unflatten_dict({**self._constants(), **s.assignments})

    def _constants(self) -> dict[str, Any]:
        """The space's fixed entries, which Tune passes on only from its own param_space."""
        if self._space is None:
            return {}
        resolved, _, _ = parse_spec_vars(flatten_dict(self._space, prevent_delimiter=True))
        return {"/".join(path): value for path, value in resolved}

    def report(self, trial_id: str, result: Mapping[str, Any]) -> bool:
        """Report one Tune result (once per `training_iteration`); True when tauopt says stop."""
        run = self._runs.get(trial_id)
        if run is None:
            return False  # not one of ours (e.g. added with add_evaluated_point)
        value = metric_value(flatten_dict(dict(result)), self._metric or "", f"the result of trial {trial_id}")
        return run.report(int(result.get("training_iteration", (run.last_step or 0) + 1)), value)

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.report(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        run = self._runs.pop(trial_id, None)
        if run is None:
            return
        if error:
            run.fail()
            return
        value = None
        if result is not None and self._metric is not None:
            flat = flatten_dict(dict(result))
            value = float(flat[self._metric]) if self._metric in flat else None
        run.finish(value)

    def stopper(self) -> "TauoptStopper":
        """A Tune `Stopper` that stops a trial when tauopt's early-stopping rule says so."""
        return TauoptStopper(self)

    # -- state: Tune saves it with the run; Tuner.restore continues the experiment ---

    def get_state(self) -> dict[str, Any]:
        runs = {t: (r.suggestion_id, r.last_step, r.last_value, r.stop_told) for t, r in self._runs.items()}
        return {"experiment_id": self.experiment_id, "metric": self._metric, "mode": self._mode, "space": self._space, "bandwidth": self._bandwidth, "runs": runs}

    def set_state(self, state: dict[str, Any]) -> None:
        self.experiment_id, self._metric, self._mode = state["experiment_id"], state["metric"], state["mode"]
        self._space, self._bandwidth, self._checked = state["space"], state["bandwidth"], False
        self._runs = {}
        for trial_id, (sid, step, value, stop) in state["runs"].items():
            run = TrialRun(self.client, self.experiment_id or "", sid)
            run.last_step, run.last_value, run.stop_told = step, value, stop
            self._runs[trial_id] = run
        if self.experiment_id is not None and not self._joined:
            self._close_orphans(self.experiment_id)

    def _close_orphans(self, experiment_id: str) -> None:
        """Suggestions made after Tune's last save belong to trials the restored run
        does not know: their slots return (the experiment is this searcher's alone)."""
        live = {run.suggestion_id for run in self._runs.values()}
        for s in self.client.suggestions(experiment_id, state="open"):
            if s.id not in live:
                self.client.close_suggestion(experiment_id, s.id)

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.get_state(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.set_state(pickle.load(f))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None  # threads and sockets; the factory reconnects
        state["_runs"] = {}  # their clients; get_state/save carries the trials
        return state


class TauoptStopper(Stopper):
    """Stops a Tune trial when tauopt's rule says so. Tune calls a stopper before
    its searcher sees a result, so the report is made here (the searcher's own
    `on_trial_result` then skips the step already reported)."""

    def __init__(self, searcher: TauoptSearch) -> None:
        self.searcher = searcher

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return self.searcher.report(trial_id, result)

    def stop_all(self) -> bool:
        return False


def _cluster_cpus() -> int:
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1))) if ray.is_initialized() else 1

