"""The plot sample of a long history: bounded, exact best-so-far trace, the best and the latest kept."""

from __future__ import annotations

import random

from tauopt.engine._downsample import downsample
from tauopt.models import Observation


def history(n: int, seed: int = 0) -> list[Observation]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        failed = i % 23 == 4
        out.append(Observation(str(i + 1), "e", None, {"x": rng.random()}, None if failed else rng.random(), failed))
    return out


def test_a_long_history_is_cut_to_the_limit_keeping_the_best_the_latest_and_the_exact_trace() -> None:
    obs = history(20_000)
    s = downsample(obs, "minimize", 500)
    assert s.total == 20_000 and len(s.kept) == len(s.positions) == 500
    assert list(s.positions) == sorted(set(s.positions))
    assert all(obs[p - 1] is o for p, o in zip(s.positions, s.kept))
    best = min((o for o in obs if not o.failed), key=lambda o: o.value or 0.0)
    assert best in s.kept
    assert s.positions[-50:] == tuple(range(20_000 - 49, 20_001))  # the latest tenth of the limit
    trace, b = [], None  # the best-so-far line, computed the plain way
    for i, o in enumerate(obs):
        if o.value is not None and not o.failed and (b is None or o.value < b):
            b = o.value
            trace.append((i + 1, o.id, o.value, o.created_at))
    assert list(s.best_trace) == trace
    # stratified: every tenth of the history holds some of the sample
    assert all(any(k * 2000 < p <= (k + 1) * 2000 for p in s.positions) for k in range(10))


def test_maximize_keeps_the_largest_and_a_short_history_is_kept_whole() -> None:
    obs = history(3000, seed=1)
    s = downsample(obs, "maximize", 100)
    assert max((o for o in obs if not o.failed), key=lambda o: o.value or 0.0) in s.kept
    assert [t[2] for t in s.best_trace] == sorted(t[2] for t in s.best_trace)
    whole = downsample(obs[:80], "maximize", 100)
    assert whole.kept == tuple(obs[:80]) and whole.positions == tuple(range(1, 81))
