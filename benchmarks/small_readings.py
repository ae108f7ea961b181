"""The small-budget goal's readings from `quality.py --small` reports: the GP through
the engine, over one or more repeated runs of the same seeds, against Optuna's TPE
and GPSampler run on those seeds.

    .venv/bin/python benchmarks/small_readings.py \\
        --tpe benchmarks/data/small42/report_d10_s0-9_tpe.json \\
        --gpsampler benchmarks/data/small42/report_d10_s0-4_gpsampler.json benchmarks/data/small42/report_d10_s5-9_gpsampler.json \\
        --run a benchmarks/data/small42/report_d10_s0-4_1s_park_a.json benchmarks/data/small42/report_d10_s5-9_1s_park_a.json \\
        --run b ...

A reading is one (function, d, W, budget): the GP's median final log10 regret at or
below the reference's median. Per run (a run's reports cover disjoint seeds) and
pooled (every run's per-seed values in one median: a run at 1 s evaluations is not
deterministic, since fits take real time, so repeated runs measure the same cell
again). The second table pairs seeds (a seed picks the problem instance, so the GP
and TPE ran the same function): each seed's GP value (the mean over runs) minus
TPE's, with the standard error of the mean difference, so a reading decided by the
seeds' spread reads as such.

Markdown on stderr (each GP median marked ✓ or ✗ against TPE's, then GPSampler's),
JSON on stdout (per reading: the medians, counts, the paired
mean and its standard error; per run and pooled: how many readings are at or below).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from typing import Any

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from quality import _join_seeds, _read_rows  # noqa: E402

Cell = tuple[str, int, int, str]  # function, d, W, budget ("5d", "6d")


def per_seed(paths: list[str], engine: bool, method: str | None = None) -> dict[Cell, dict[int, float]]:
    """{cell: {seed: final log10 regret}} from the reports' engine rows (engine=True)
    or one Optuna method's rows; reports over disjoint seeds join as `quality.py --merge`
    joins them (a seed in two reports is refused there)."""
    rows = [r for path in paths for r in _read_rows(path)
            if r["method"].startswith("engine") == engine and (method is None or r["method"] == method)]
    out: dict[Cell, dict[int, float]] = {}
    for r in _join_seeds(rows):
        for key in (k for k in r if k.startswith("per_seed@")):
            cell = (r["function"], r["d"], r["workers"], key.partition("@")[2])
            seen = out.setdefault(cell, {})
            if set(seen) & set(r["seeds"]):  # two engine methods (policies) of one cell in one run
                raise SystemExit(f"{cell}: seeds {sorted(set(seen) & set(r['seeds']))} in rows of two methods; give one run's rows of one method")
            seen.update(zip(r["seeds"], r[key]))
    return out


def readings(tpe: dict[Cell, dict[int, float]], gps: dict[Cell, dict[int, float]], runs: dict[str, dict[Cell, dict[int, float]]]) -> dict[str, Any]:
    """Every cell all runs and TPE have: the medians, the counts and the paired differences
    (None where fewer than two seeds pair)."""
    cells = sorted(set.intersection(*(set(r) for r in runs.values())) & set(tpe))
    counts = {name: {"tpe": 0, "gpsampler": 0} for name in [*runs, "pooled"]}
    rows = []
    for c in cells:
        t = statistics.median(tpe[c].values())
        g = statistics.median(gps[c].values()) if c in gps else None
        medians = {name: statistics.median(r[c].values()) for name, r in runs.items()}
        medians["pooled"] = statistics.median([v for r in runs.values() for v in r[c].values()])
        for name, m in medians.items():
            counts[name]["tpe"] += m <= t
            counts[name]["gpsampler"] += g is not None and m <= g
        diffs = [statistics.mean(r[c][s] for r in runs.values() if s in r[c]) - v
                 for s, v in tpe[c].items() if any(s in r[c] for r in runs.values())]
        paired = len(diffs) > 1
        rows.append({
            "function": c[0], "d": c[1], "workers": c[2], "budget": c[3], "gp": medians, "tpe": t, "gpsampler": g,
            "paired_mean": statistics.mean(diffs) if paired else None,
            "paired_se": statistics.stdev(diffs) / math.sqrt(len(diffs)) if paired else None,
            "seeds_at_or_below": sum(x <= 0 for x in diffs), "paired_seeds": len(diffs),
        })
    return {"readings": rows, "counts": counts, "n": len(cells)}


def markdown(report: dict[str, Any], names: list[str]) -> str:
    mark = lambda m, ref: "–" if ref is None else ("✓" if m <= ref else "✗")  # noqa: E731
    cols = [*names, "pooled"] if len(names) > 1 else names
    lines = ["| function | d | W | budget | " + " | ".join(f"GP, {n}" for n in cols) + " | TPE | GPSampler |",
             "|---" * (6 + len(cols)) + "|"]
    for r in report["readings"]:
        gp = " | ".join(f"{r['gp'][n]:.2f} {mark(r['gp'][n], r['tpe'])}{mark(r['gp'][n], r['gpsampler'])}" for n in cols)
        gs = "–" if r["gpsampler"] is None else f"{r['gpsampler']:.2f}"
        lines.append(f"| {r['function']} | {r['d']} | {r['workers']} | {r['budget'][0]}·d | {gp} | {r['tpe']:.2f} | {gs} |")
    n = report["n"]
    lines.append("")
    lines += [f"{name}: at or below TPE in {c['tpe']} of {n}, GPSampler in {c['gpsampler']} of {n}" for name, c in report["counts"].items()
              if name in cols]
    lines += ["", "| function | d | W | budget | GP − TPE, paired mean | standard error | seeds at or below |", "|---|---|---|---|---|---|---|"]
    paired = [r for r in report["readings"] if r["paired_mean"] is not None]
    for r in paired:
        lines.append(f"| {r['function']} | {r['d']} | {r['workers']} | {r['budget'][0]}·d | {r['paired_mean']:+.3f} | "
                     f"{r['paired_se']:.3f} | {r['seeds_at_or_below']} of {r['paired_seeds']} |")
    above = sum(r["paired_mean"] > 2 * r["paired_se"] for r in paired)
    below = sum(r["paired_mean"] < -2 * r["paired_se"] for r in paired)
    lines.append(f"\nthe GP more than two standard errors above TPE in {above} of {len(paired)} paired readings, below in {below}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tpe", nargs="+", required=True, metavar="REPORT", help="reports with optuna_tpe rows")
    ap.add_argument("--gpsampler", nargs="*", default=[], metavar="REPORT", help="reports with optuna_gp rows")
    ap.add_argument("--run", nargs="+", action="append", required=True, metavar=("NAME", "REPORT"),
                    help="a run's name and its reports (engine rows, disjoint seeds); repeat for each run")
    args = ap.parse_args(argv)
    if any(len(r) < 2 for r in args.run):
        ap.error("--run takes a name and at least one report")
    if len({r[0] for r in args.run}) < len(args.run):
        ap.error("--run: give each run its own name")
    runs = {r[0]: per_seed(r[1:], engine=True) for r in args.run}
    report = readings(per_seed(args.tpe, False, "optuna_tpe"), per_seed(args.gpsampler, False, "optuna_gp"), runs)
    print(json.dumps(report, indent=1))
    print(markdown(report, list(runs)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
