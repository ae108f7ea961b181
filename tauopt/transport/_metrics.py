"""The metrics every door records into, one registry per engine (prometheus_client).

A door only counts; the HTTP door renders the registry at GET /metrics. Doors
serving the same engine in one process (the KerasTuner chief with --http-port:
gRPC for the workers, HTTP for people) share one `Metrics`, found with
`Metrics.for_engine(engine)`, so a scrape of the HTTP door shows the gRPC door's
requests too. Doors never import each other; both import this module.

    tauopt_asks_total{door,outcome}            outcome: ok or the error_type
    tauopt_observations_total{door,outcome}    (door: http, grpc)
    tauopt_ask_seconds{door}                   histogram
    tauopt_rejections_429_total{type}          bandwidth_full, rate_limited, ...
    tauopt_grpc_requests_total{method,code}    the KerasTuner Oracle's RPCs by status code
    tauopt_grpc_request_seconds{method}        histogram

Read at scrape time from the engine (nothing kept per experiment here; the store
aggregates its index columns, so a scrape reads no experiment and its cost does not
grow with the experiments kept, as a database exporter's aggregate queries):

    tauopt_experiments{state}
    tauopt_experiment_open_suggestions{experiment}   top N experiments only (bounded label
    tauopt_experiment_observations{experiment}       cardinality), and only in a scrape made
                                                     with the metrics token: an experiment id
                                                     is its owner's, not every scraper's
    tauopt_gp_fits_total, tauopt_gp_fallbacks_total{reason}, tauopt_pool_queue_depth,
    tauopt_dask_scheduler_lost_total, tauopt_dask_reconnects_total (with --pool dask)
    tauopt_daemon_info{daemon_id}                    1; this daemon's id (its log's, /v1/health's)
    tauopt_daemon_ready                              1 when /v1/health says ready, else 0
    tauopt_daemon_owned_experiments                  daemons sharing a database only: how many
    tauopt_daemons_live                              experiments this one owns; how many daemons
                                                     hold a live lease (counts: no experiment id)

Fed by the store after each commit: tauopt_store_commit_seconds and
tauopt_store_commit_batches (histograms).
"""

from __future__ import annotations

import weakref
from typing import Any, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

__all__ = ["Metrics", "TOP_EXPERIMENTS", "CONTENT_TYPE_LATEST", "RPC_METHODS"]

TOP_EXPERIMENTS = 10
_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# The KerasTuner Oracle service's methods: the only `method` label values (bounded).
RPC_METHODS = frozenset({
    "GetSpace", "UpdateSpace", "CreateTrial", "UpdateTrial", "EndTrial", "GetBestTrials", "GetTrial",  # KerasTuner
    "CreateNewStudy", "DeleteStudy", "SetStudyUserAttribute", "SetStudySystemAttribute", "GetStudyIdFromName",
    "GetStudyNameFromId", "GetStudyDirections", "GetStudyUserAttributes", "GetStudySystemAttributes", "GetAllStudies",
    "CreateNewTrial", "SetTrialParameter", "GetTrialIdFromStudyIdTrialNumber", "SetTrialStateValues",
    "SetTrialIntermediateValue", "SetTrialUserAttribute", "SetTrialSystemAttribute", "GetTrials",  # Optuna
})  # fmt: skip
_RPC_KIND = {"CreateTrial": "ask", "EndTrial": "observe"}
_BY_ENGINE: "weakref.WeakKeyDictionary[Any, Metrics]" = weakref.WeakKeyDictionary()


class Metrics:
    """One engine's metrics; `bind(engine)` once the engine runs (the app's lifespan)."""

    def __init__(self, top_experiments: int = TOP_EXPERIMENTS) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.top_experiments = top_experiments
        r = self.registry
        self.asks = Counter("tauopt_asks", "Asks for a suggestion, by door and outcome", ["door", "outcome"], registry=r)
        self.observations = Counter("tauopt_observations", "Observations posted, by door and outcome", ["door", "outcome"], registry=r)
        self.ask_seconds = Histogram("tauopt_ask_seconds", "Ask latency at the door", ["door"], buckets=_LATENCY_BUCKETS, registry=r)
        self.rejections = Counter("tauopt_rejections_429", "429 answers, by error type", ["type"], registry=r)
        self.commit_seconds = Histogram("tauopt_store_commit_seconds", "Store transaction time", buckets=_LATENCY_BUCKETS, registry=r)
        self.commit_batches = Histogram("tauopt_store_commit_batches", "Batches per store transaction", buckets=_BATCH_BUCKETS, registry=r)
        self.rpcs = Counter("tauopt_grpc_requests", "RPCs at the gRPC doors (KerasTuner's Oracle, Optuna's storage), by method and status code", ["method", "code"], registry=r)
        self.rpc_seconds = Histogram("tauopt_grpc_request_seconds", "KerasTuner Oracle RPC latency", ["method"], buckets=_LATENCY_BUCKETS, registry=r)
        self._engine: Any = None
        # Each label set's child, looked up once: `labels()` validates and locks on every
        # call (~3 us each, three a pair). Label values are bounded, and no child is ever removed.
        self._children: dict[tuple[str, ...], tuple[Any, ...]] = {}
        r.register(_EngineCollector(self))

    @classmethod
    def for_engine(cls, engine: Any, top_experiments: int = TOP_EXPERIMENTS) -> "Metrics":
        """The one Metrics of `engine` (made and bound on first use): every door serving
        that engine counts into it."""
        found = _BY_ENGINE.get(engine)
        if found is None:
            found = _BY_ENGINE[engine] = cls(top_experiments)
            found.bind(engine)
        return found

    def bind(self, engine: Any) -> None:
        self._engine = engine
        _BY_ENGINE.setdefault(engine, self)
        if hasattr(engine.store, "on_commit"):
            engine.store.on_commit = self._on_commit

    def _on_commit(self, batches: int, seconds: float) -> None:
        self.commit_seconds.observe(seconds)
        self.commit_batches.observe(batches)

    def record(self, kind: str, door: str, outcome: str, seconds: float) -> None:
        key = (kind, door, outcome)
        children = self._children.get(key)
        if children is None:
            if kind == "ask":
                children = (self.asks.labels(door, outcome), self.ask_seconds.labels(door))
            else:
                children = (self.observations.labels(door, outcome), None)
            self._children[key] = children
        children[0].inc()
        if children[1] is not None:
            children[1].observe(seconds)

    def record_rpc(self, method: str, code: str, outcome: str, seconds: float) -> None:
        """One RPC of a gRPC door answered with status `code` (a grpc.StatusCode name); `outcome`
        is ok or the error type, as the HTTP door counts asks (CreateTrial) and
        observations (EndTrial). Labels stay bounded whatever a caller sends."""
        method = method if method in RPC_METHODS else "other"
        code = code if code.isupper() and code.replace("_", "").isalpha() and len(code) <= 24 else "UNKNOWN"
        key = ("rpc", method, code)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (self.rpcs.labels(method, code), self.rpc_seconds.labels(method))
        children[0].inc()
        children[1].observe(seconds)
        kind = _RPC_KIND.get(method)
        if kind is not None:
            self.record(kind, "grpc", outcome if outcome.isidentifier() and len(outcome) <= 40 else "internal", seconds)

    async def scrape(self, per_experiment: bool = True) -> bytes:
        """The registry in Prometheus' text format, the engine's gauges read now;
        `per_experiment=False` leaves out every series labelled by experiment."""
        if self._engine is not None:
            self._snapshot = await _engine_snapshot(self._engine, self.top_experiments if per_experiment else 0)
        return generate_latest(self.registry)


async def _engine_snapshot(engine: Any, top: int) -> dict[str, Any]:
    # counts and the busiest few, aggregated by the store from its index (a scrape reads
    # no experiment: its cost does not grow with the experiments kept)
    gauges = await engine.store.experiment_gauges(top)
    pool = engine.pool
    daemon = await engine.status()
    return {
        "daemon": daemon,
        "states": {"active": 0, "completed": 0, "archived": 0, **gauges.states},
        "top": list(gauges.busiest),
        "fits": 0 if pool is None else pool.stats.fits,  # a Sobol fallback (a cluster outage) is no fit
        "fallbacks": {} if pool is None else dict(pool.stats.fallback_kinds),
        "queue": 0 if pool is None else getattr(pool, "queue_depth", 0),
        "cluster": _cluster_counts(pool),
    }


def _cluster_counts(pool: Any) -> dict[str, int]:
    """A cluster executor's connection counters (the Dask pool's `lost`, `reconnects`)."""
    stats = getattr(getattr(pool, "executor", None), "stats", None)
    return {k: getattr(stats, k) for k in ("lost", "reconnects") if isinstance(getattr(stats, k, None), int)}


class _EngineCollector:
    """Gauges read from the snapshot `Metrics.render` took just before generating."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        snap: dict[str, Any] = getattr(self.metrics, "_snapshot", None) or {
            "states": {}, "top": [], "fits": 0, "fallbacks": {}, "queue": 0, "cluster": {},
        }  # fmt: skip
        states = GaugeMetricFamily("tauopt_experiments", "Experiments by state", labels=["state"])
        for state, n in sorted(snap["states"].items()):
            states.add_metric([state], n)
        yield states
        top = self.metrics.top_experiments
        open_ = GaugeMetricFamily("tauopt_experiment_open_suggestions", f"Open suggestions (top {top} experiments)", labels=["experiment"])
        obs = GaugeMetricFamily("tauopt_experiment_observations", f"Observations (top {top} experiments)", labels=["experiment"])
        for eid, n_open, n_obs in snap["top"]:
            open_.add_metric([eid], n_open)
            obs.add_metric([eid], n_obs)
        yield open_
        yield obs
        yield CounterMetricFamily("tauopt_gp_fits", "GP proposals computed on the pool (fallbacks counted apart)", value=snap["fits"])
        fallbacks = CounterMetricFamily("tauopt_gp_fallbacks", "GP proposals answered by Sobol instead, by reason", labels=["reason"])
        for reason, n in sorted(snap["fallbacks"].items()):
            fallbacks.add_metric([reason], n)
        yield fallbacks
        cluster = snap.get("cluster", {})
        if "lost" in cluster:
            yield CounterMetricFamily("tauopt_dask_scheduler_lost", "Times the Dask scheduler was found gone", value=cluster["lost"])
            yield CounterMetricFamily("tauopt_dask_reconnects", "Reconnections to the Dask scheduler after a loss", value=cluster["reconnects"])
        yield GaugeMetricFamily("tauopt_pool_queue_depth", "pooled strategy jobs submitted and not yet answered (queued or running)", value=snap["queue"])
        daemon = snap.get("daemon")
        if daemon is not None:
            info = GaugeMetricFamily("tauopt_daemon_info", "This daemon, by the id its log and /v1/health show", labels=["daemon_id"])
            info.add_metric([daemon.daemon_id], 1)
            yield info
            yield GaugeMetricFamily("tauopt_daemon_ready", "1 when this daemon is ready (store open; lease live when shared)", value=int(daemon.ready))
            if daemon.sharing is not None:
                yield GaugeMetricFamily("tauopt_daemon_owned_experiments", "Experiments this daemon owns (daemons sharing a database)", value=daemon.sharing.owned)
                yield GaugeMetricFamily("tauopt_daemons_live", "Daemons with a live lease on the shared database, this one included", value=daemon.sharing.daemons)
