"""The GP row's yardstick: one fit's time at the n the row's asks saw, same run.

Issue 16's GP target reads "ask p95 <= 3x one fit's time at the same n". After
the row `inproc/memory/gp/w8` ran, its own history is replayed through the GP
as a pure function, as the pool runs it (torch and BLAS at one thread, the
workers' 7 other suggestions pending, one point asked), at four history lengths
from n0 (before the measured window) to n_end (after it). One fit at n is
warm-started from the fit at n - 8, as the engine's jobs are (each job's history
is one batch of 8 observations longer than the previous job's): the
hyperparameters are fitted to 8 new observations. Each figure is the p50 of
`repeats` such proposals.

Before 2026-12-02 the yardstick warm-started each repeat from the previous
repeat on the same data, so the fit stopped after 0 L-BFGS-B iterations and the
"fit" was a posterior and one acquisition; that figure is still reported
(`proposal_without_fit_ms`, `ask_p95_over_proposal_without_fit`), so both
readings are in every run.

- `ask_p95_over_one_fit`: the row's ask p95 over one fit at n_mid, half-way
  (the median ask's n).
- `ask_over_one_fit_p95`: the same n for every ask: the i-th ask (in completion
  order) saw about n0 + i observations; its latency over one fit there
  (interpolated between the four lengths), p95 over the asks.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from _bench_common import METRIC, PARAMETERS


BATCH = 8  # observations between two of the engine's jobs with 8 workers


def one_fit_ms(history: Sequence[Any], n: int, pending: int = 7, repeats: int = 5) -> tuple[float, float]:
    """p50 milliseconds of a one-point GP proposal over the first n observations,
    warm-started from the fit at n - BATCH (a real fit), and of the same proposal
    warm-started from a fit on the same n (0 fit iterations: posterior and acquisition)."""
    import scipy.linalg  # noqa: F401 - loaded before blas_pinned looks for the BLAS libraries

    from tauopt.compute._workers import blas_pinned, torch_pinned
    from tauopt.models import Metric
    from tauopt.schema import parse_metric
    from tauopt.space import Space
    from tauopt.strategies._request import SuggestRequest
    from tauopt.strategies.gp import propose_gp

    space, metric = Space.parse(PARAMETERS), parse_metric(METRIC)
    n = max(1, min(n, len(history) - pending))
    open_points = tuple(o.assignments for o in history[n : n + pending])

    def request(m: int, drawn: int) -> SuggestRequest:
        return SuggestRequest(space, metric, tuple(history[:m]), open_points, 1, 0, drawn)

    with blas_pinned(), torch_pinned():  # as in the pool (call from the event loop's thread: blas_pinned)
        before = propose_gp(request(max(1, n - BATCH), n), np.random.default_rng(0)).state
        fits, no_fit, warm = [], [], before
        for r in range(repeats):
            t0 = time.perf_counter()
            res = propose_gp(request(n, n + r), np.random.default_rng(r + 1), before)
            fits.append(time.perf_counter() - t0)
            warm = res.state
        for r in range(repeats):
            t0 = time.perf_counter()
            warm = propose_gp(request(n, n + r), np.random.default_rng(r + 1), warm).state
            no_fit.append(time.perf_counter() - t0)
    return round(float(np.median(fits)) * 1000, 1), round(float(np.median(no_fit)) * 1000, 1)


def gp_yardstick(history: Sequence[Any], n0: int, ask_s: Sequence[float], repeats: int = 5) -> dict[str, Any]:
    """One fit at four lengths of the row's history, and the row's asks over it."""
    n_end = len(history)
    ns = sorted({max(1, n0 + (n_end - n0) * k // 3) for k in range(4)})
    fits, no_fit = (list(t) for t in zip(*(one_fit_ms(history, n, repeats=repeats) for n in ns)))
    n_mid = n0 + (n_end - n0) // 2
    mid, mid_no_fit = float(np.interp(n_mid, ns, fits)), float(np.interp(n_mid, ns, no_fit))
    p95_ms = float(np.percentile(ask_s, 95)) * 1000 if ask_s else float("nan")
    per_ask = [1000 * a / float(np.interp(n0 + i, ns, fits)) for i, a in enumerate(ask_s)]
    return {
        "one_fit_ms": {"n": ns, "p50_ms": fits, "n_mid": n_mid, "at_n_mid": round(mid, 1)},
        "ask_p95_over_one_fit": round(p95_ms / mid, 2) if mid else None,
        "ask_over_one_fit_p95": round(float(np.percentile(per_ask, 95)), 2) if per_ask else None,
        "proposal_without_fit_ms": {"p50_ms": no_fit, "at_n_mid": round(mid_no_fit, 1)},
        "ask_p95_over_proposal_without_fit": round(p95_ms / mid_no_fit, 2) if mid_no_fit else None,
    }


def gp_lines(results: Sequence[dict[str, Any]]) -> str:
    """The report's GP lines: ask p95 against one fit, pairs/s against Optuna's GPSampler."""
    by_name = {r["name"]: r for r in results if "error" not in r}
    lines = []
    for r in results:
        fit = r.get("one_fit_ms")
        if fit is None:
            continue
        optuna = by_name.get(f"optuna/memory/gp/threads{r['workers']}")
        vs = f"; Optuna GPSampler {r['workers']} threads {optuna['pairs_per_s']:,.1f} pairs/s" if optuna else ""
        at = ", ".join(f"{ms:,.0f} ms at n={n}" for n, ms in zip(fit["n"], fit["p50_ms"]))
        lines.append(
            f"- {r['name']}: ask p95 {r['ask_ms']['p95']:,.0f} ms = {r['ask_p95_over_one_fit']}x one fit at n={fit['n_mid']} "
            f"(per ask at its own n, p95: {r['ask_over_one_fit_p95']}x; one fit: {at}){_no_fit(r)}; {r['pairs_per_s']:,.1f} pairs/s{vs}"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def _no_fit(r: dict[str, Any]) -> str:
    """The reading against a proposal with 0 fit iterations (the yardstick before 2026-12-02)."""
    no_fit = r.get("proposal_without_fit_ms")
    if no_fit is None:
        return ""
    return f"; {r['ask_p95_over_proposal_without_fit']}x a proposal without fit iterations ({no_fit['at_n_mid']:,.0f} ms)"
