"""The GP row's yardstick: one fit's time at the n the row's asks saw, same run.

Issue 16's GP target reads "ask p95 <= 3x one fit's time at the same n". After
the row `inproc/memory/gp/w8` ran, its own history is replayed through the GP
as a pure function, as the pool runs it (one torch thread, warm-started from the
previous fit, the workers' 8 suggestions pending, one point asked), at four
history lengths from n0 (before the measured window) to n_end (after it); each
figure is the p50 of `repeats` warm fits (the first, cold one is not counted).

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


def one_fit_ms(history: Sequence[Any], n: int, pending: int = 7, repeats: int = 5) -> float:
    """p50 milliseconds of a one-point GP proposal over the first n observations."""
    import torch

    from tauopt.models import Metric
    from tauopt.space import Space
    from tauopt.strategies._request import SuggestRequest
    from tauopt.strategies.gp import propose_gp

    saved = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the pool
    space, metric = Space.parse(PARAMETERS), Metric.parse(METRIC)
    n = max(1, min(n, len(history) - pending))
    obs = tuple(history[:n])
    open_points = tuple(o.assignments for o in history[n : n + pending])
    warm, times = None, []
    try:
        for r in range(repeats + 1):
            req = SuggestRequest(space, metric, obs, open_points, 1, 0, n + r)
            t0 = time.perf_counter()
            res = propose_gp(req, np.random.default_rng(r), warm)
            if r:
                times.append(time.perf_counter() - t0)
            warm = res.state
    finally:
        torch.set_num_threads(saved)
    return round(float(np.median(times)) * 1000, 1)


def gp_yardstick(history: Sequence[Any], n0: int, ask_s: Sequence[float], repeats: int = 5) -> dict[str, Any]:
    """One fit at four lengths of the row's history, and the row's asks over it."""
    n_end = len(history)
    ns = sorted({max(1, n0 + (n_end - n0) * k // 3) for k in range(4)})
    fits = [one_fit_ms(history, n, repeats=repeats) for n in ns]
    n_mid = n0 + (n_end - n0) // 2
    mid = float(np.interp(n_mid, ns, fits))
    p95_ms = float(np.percentile(ask_s, 95)) * 1000 if ask_s else float("nan")
    per_ask = [1000 * a / float(np.interp(n0 + i, ns, fits)) for i, a in enumerate(ask_s)]
    return {
        "one_fit_ms": {"n": ns, "p50_ms": fits, "n_mid": n_mid, "at_n_mid": round(mid, 1)},
        "ask_p95_over_one_fit": round(p95_ms / mid, 2) if mid else None,
        "ask_over_one_fit_p95": round(float(np.percentile(per_ask, 95)), 2) if per_ask else None,
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
            f"(per ask at its own n, p95: {r['ask_over_one_fit_p95']}x; one fit: {at}); {r['pairs_per_s']:,.1f} pairs/s{vs}"
        )
    return "\n".join(lines) + ("\n" if lines else "")
