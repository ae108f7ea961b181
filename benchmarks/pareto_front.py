"""What the Pareto front costs the engine as a history grows (pure computation, no door).

Two objectives, N observations, either all on the front (each better in one
objective, worse in the other) or random (a front of a dozen). `cold_s`: the
front of the whole history (an actor's first read); `one_new_s`: the next read
after one more observation (compared with the front only); `unchanged_s`: a read
with nothing new. Also the O(n log n) sweep alone on N random points. Prints JSON.

    python benchmarks/pareto_front.py --observations 100000
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from tauopt.models import Experiment, Observation, Parameter
from tauopt.pareto import GrowingFront, nondominated
from tauopt.schema import parse_metrics, parse_parameter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--observations", type=int, default=100_000)
    n = parser.parse_args().observations
    metrics = parse_metrics(metrics=[{"name": "acc", "objective": "maximize"}, {"name": "lat", "objective": "minimize"}])
    exp = Experiment("e", "e", (parse_parameter({"name": "x", "type": "double", "bounds": [0, 1]}),), metrics[0], metrics=metrics)
    out: dict[str, object] = {"observations": n, "load": round(os.getloadavg()[0], 1)}
    for label, on_front in (("all_on_front", True), ("random", False)):
        rng = np.random.default_rng(0)
        values = np.arange(n) / n if on_front else rng.random(n)
        lats = np.arange(n) / n if on_front else rng.random(n)
        obs = [Observation(str(i + 1), "e", None, {"x": 0.5}, float(values[i]), False, 0.0, {"lat": float(lats[i])}) for i in range(n)]
        front = GrowingFront(exp)
        t = time.perf_counter()
        size = len(front.front(obs))
        cold = time.perf_counter() - t
        obs.append(Observation(str(n + 1), "e", None, {"x": 0.5}, 0.3, False, 0.0, {"lat": 0.9}))
        t = time.perf_counter()
        front.front(obs)
        one_new = time.perf_counter() - t
        t = time.perf_counter()
        front.front(obs)
        unchanged = time.perf_counter() - t
        out[label] = {"front": size, "cold_s": round(cold, 3), "one_new_s": round(one_new, 4), "unchanged_s": round(unchanged, 4)}
    points = np.random.default_rng(1).random((n, 2))
    t = time.perf_counter()
    nondominated(points)
    out["sweep_s"] = round(time.perf_counter() - t, 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
