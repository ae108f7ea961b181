"""The report: a Markdown table per kind, the ratios against Optuna, and a PNG
of ask-latency CDFs per door."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Sequence

# (label, tauopt configuration, Optuna configuration(s)): printed when both ran. A tuple
# of Optuna configurations compares with the best of them (its highest pairs/s).
_OPTUNA_MT_FLOAT2 = ("optuna/memory/random/threads8/float2", "optuna/memory/random/threads32/float2")
RATIO_PAIRS: tuple[tuple[str, str, str | tuple[str, ...]], ...] = (
    ("two floats, 1 worker: inproc vs Optuna 1 thread", "inproc/memory/random/w1/e1/float2", "optuna/memory/random/threads1/float2"),
    ("two floats, 8 workers: inproc vs Optuna's best of 8 and 32 threads", "inproc/memory/random/w8/e1/float2", _OPTUNA_MT_FLOAT2),
    ("two floats, 64 workers: inproc vs Optuna's best of 8 and 32 threads", "inproc/memory/random/w64/e1/float2", _OPTUNA_MT_FLOAT2),
    ("in-memory, 1 worker: inproc vs Optuna 1 thread", "inproc/memory/random/w1/e1", "optuna/memory/random/threads1"),
    ("in-memory, 8 workers: inproc vs Optuna 8 threads", "inproc/memory/random/w8/e1", "optuna/memory/random/threads8"),
    ("in-memory, 64 workers: inproc vs Optuna 64 threads", "inproc/memory/random/w64/e1", "optuna/memory/random/threads64"),
    ("GP, in-memory, 8 workers: inproc vs Optuna GPSampler 8 threads", "inproc/memory/gp/w8/e1", "optuna/memory/gp/threads8"),
    ("durable, inproc SQLite 64 workers vs Optuna SQLite 4 processes", "inproc/sqlite/random/w64/e1", "optuna/sqlite/random/procs4"),
    ("durable, http 4 processes x 1 worker vs Optuna SQLite 4 processes", "http/sqlite/random/w4/p4/e1", "optuna/sqlite/random/procs4"),
    ("durable, http 4 processes x 16 workers vs Optuna SQLite 4 processes", "http/sqlite/random/w64/p4/e1", "optuna/sqlite/random/procs4"),
    ("durable, http 4 processes x 1 worker vs Optuna Journal 4 processes", "http/sqlite/random/w4/p4/e1", "optuna/journal/random/procs4"),
    ("durable, http 4 processes x 16 workers vs Optuna Journal 4 processes", "http/sqlite/random/w64/p4/e1", "optuna/journal/random/procs4"),
)


def _f(x: Any, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def _errors(e: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in e.items()) or "0"


def _inv(r: dict[str, Any]) -> str:
    inv = r.get("invariants") or {}
    if inv.get("open_from") == "n/a":
        return "n/a"
    mark = "ok" if inv.get("ok") else "**FAIL**"
    seen = inv.get("max_open_seen")
    return f"{mark} (dup {inv.get('duplicates')}, open {'n/a' if seen is None else seen}/{inv.get('bandwidth')})"


def floor_for(r: dict[str, Any]) -> str | None:
    """The floor measured in the same shape as a door's row: the same door's transport
    with the same workers and processes (and client, over HTTP), no engine behind. The
    floor does not depend on the number of experiments; rows with evaluation time have none."""
    if r.get("kind") != "contention" or r.get("eval_s"):
        return None
    w, p = r["workers"], r["procs"]
    if r["door"] == "inproc":
        return f"floor/mailbox/w{w}"
    if r["door"] == "http":
        client = r.get("client", "httpx")
        return f"floor/http/w{w}/p{p}" + ("" if client == "httpx" else f"/{client}")
    if r["door"] == "kerastuner":
        return f"floor/kerastuner/w{w}/p{p}"
    return None


def floor_shares(results: Sequence[dict[str, Any]]) -> dict[str, tuple[float, str]]:
    """Per door row: (its pairs/s over its floor's, the floor's name), where that floor ran."""
    by_name = {r["name"]: r for r in results if "error" not in r}
    out = {}
    for r in results:
        f = floor_for(r)
        if f is None or "error" in r or f not in by_name or not by_name[f]["pairs_per_s"]:
            continue
        out[r["name"]] = (r["pairs_per_s"] / by_name[f]["pairs_per_s"], f)
    return out


def _share(shares: dict[str, tuple[float, str]], name: str) -> str:
    if name not in shares:
        return "–"
    share, floor = shares[name]
    return f"{100 * share:.0f}% of {floor.removeprefix('floor/')}"


def table(results: Sequence[dict[str, Any]], shares: dict[str, tuple[float, str]] | None = None) -> str:
    """One row per configuration; with `shares`, a column of each row's share of its floor."""
    extra = " share of its floor |" if shares is not None else ""
    head = (
        f"| configuration | pairs/s |{extra} ask p50 ms | p95 | p99 | max | observe p50 ms | p99 | errors | invariants |\n"
        f"|---|---:|{'---:|' if shares is not None else ''}---:|---:|---:|---:|---:|---:|---|---|\n"
    )
    rows = []
    for r in results:
        share = f" {_share(shares, r['name'])} |" if shares is not None else ""
        if "error" in r:
            rows.append(f"| {r['name']} | crashed: {r['error'][:80]} |{' |' if shares is not None else ''} | | | | | | | |")
            continue
        a, o = r["ask_ms"], r["observe_ms"]
        rows.append(
            f"| {r['name']} | {_f(r['pairs_per_s'])} |{share} {_f(a['p50'], 2)} | {_f(a['p95'], 2)} | {_f(a['p99'], 2)} | "
            f"{_f(a['max'], 1)} | {_f(o['p50'], 2)} | {_f(o['p99'], 2)} | {_errors(r['errors'])} | {_inv(r)} |"
        )
    return head + "\n".join(rows) + "\n"


def ratios(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    by_name = {r["name"]: r for r in results if "error" not in r}
    out = []
    for label, ours, theirs in RATIO_PAIRS:
        a = by_name.get(ours)
        candidates = [by_name[t] for t in ((theirs,) if isinstance(theirs, str) else theirs) if t in by_name]
        b = max(candidates, key=lambda r: r["pairs_per_s"], default=None)
        if a is None or b is None or not b["pairs_per_s"] or not b["ask_ms"]["p99"]:
            continue
        theirs = b["name"]
        out.append(
            {
                "kind": "ratio",
                "name": label,
                "tauopt": ours,
                "optuna": theirs,
                "throughput_ratio": round(a["pairs_per_s"] / b["pairs_per_s"], 2),
                "ask_p99_ratio": round(a["ask_ms"]["p99"] / b["ask_ms"]["p99"], 3) if a["ask_ms"]["p99"] else None,
                "tauopt_pairs_per_s": a["pairs_per_s"],
                "optuna_pairs_per_s": b["pairs_per_s"],
                "tauopt_ask_p99_ms": a["ask_ms"]["p99"],
                "optuna_ask_p99_ms": b["ask_ms"]["p99"],
            }
        )
    return out


def _pps(by_name: dict[str, dict[str, Any]], name: str) -> float | None:
    r = by_name.get(name)
    return r["pairs_per_s"] if r else None


def _p99(by_name: dict[str, dict[str, Any]], name: str) -> float | None:
    r = by_name.get(name)
    return r["ask_ms"]["p99"] if r else None


def _quotient(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def targets(results: Sequence[dict[str, Any]], rs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 16's goals, each as (what, measured, goal, met), from this run alone."""
    by_name = {r["name"]: r for r in results if "error" not in r}
    shares = floor_shares(results)
    by_label = {r["tauopt"]: r["throughput_ratio"] for r in rs}

    def share(name: str) -> float | None:
        return shares[name][0] if name in shares else None

    mem, sql = "inproc/memory/random/w64/e1", "inproc/sqlite/random/w64/e1"
    mem100, sql100 = "inproc/memory/random/w64/e100", "inproc/sqlite/random/w64/e100"
    goals: list[tuple[str, float | None, str, float]] = [
        ("inproc memory, 64 workers: share of floor/mailbox/w64", share(mem), ">=", 0.60),
        ("inproc SQLite / memory, 64 workers (pairs/s)", _quotient(_pps(by_name, sql), _pps(by_name, mem)), ">=", 0.80),
        ("100 experiments: SQLite ask p99 / memory ask p99", _quotient(_p99(by_name, sql100), _p99(by_name, mem100)), "<=", 3.0),
        ("two floats, 1 worker: inproc / Optuna 1 thread", by_label.get("inproc/memory/random/w1/e1/float2"), ">=", 1.0),
        ("two floats, 8 workers: inproc / Optuna's best multi-threaded", by_label.get("inproc/memory/random/w8/e1/float2"), ">=", 2.0),
        ("two floats, 64 workers: inproc / Optuna's best multi-threaded", by_label.get("inproc/memory/random/w64/e1/float2"), ">=", 2.0),
        ("http, 4 x 16 workers: share of floor/http/w64/p4", share("http/sqlite/random/w64/p4/e1"), ">=", 0.75),
        ("kerastuner, 2 x 8 workers: share of floor/kerastuner/w8/p2", share("kerastuner/sqlite/random/w8/p2/e1"), ">=", 0.60),
    ]
    out = []
    for what, value, op, goal in goals:
        if value is None:
            continue
        met = value >= goal if op == ">=" else value <= goal
        out.append({"kind": "target", "name": what, "measured": round(value, 3), "goal": f"{op} {goal:g}", "met": met})
    return out


def target_table(ts: Sequence[dict[str, Any]]) -> str:
    if not ts:
        return ""
    lines = ["| goal (issue 16) | measured | target | met |", "|---|---:|---:|---|"]
    for t in ts:
        lines.append(f"| {t['name']} | {t['measured']:.2f} | {t['goal']} | {'yes' if t['met'] else '**no**'} |")
    return "\n".join(lines) + "\n"


def ratio_table(rs: Sequence[dict[str, Any]]) -> str:
    if not rs:
        return ""
    lines = [
        "| tauopt / Optuna | throughput ratio (>1: tauopt faster) | ask p99 ratio (<1: tauopt faster) | pairs/s tauopt vs Optuna | ask p99 ms tauopt vs Optuna |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rs:
        lines.append(
            f"| {r['name']} | {r['throughput_ratio']:.2f}× | {_f(r['ask_p99_ratio'], 3)} | "
            f"{_f(r['tauopt_pairs_per_s'])} vs {_f(r['optuna_pairs_per_s'])} | {_f(r['tauopt_ask_p99_ms'], 1)} vs {_f(r['optuna_ask_p99_ms'], 1)} |"
        )
    return "\n".join(lines) + "\n"


def isolation_lines(results: Iterable[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        if r.get("kind") != "isolation" or "error" in r:
            continue
        lines.append(
            f"- {r['name']}: random-experiment ask p99 {_f(r['without_gp']['ask_ms']['p99'], 1)} ms without GP load, "
            f"{_f(r['with_gp']['ask_ms']['p99'], 1)} ms with it (ratio {r['p99_ratio_with_over_without']}); "
            f"pairs/s {_f(r['without_gp']['pairs_per_s'])} → {_f(r['with_gp']['pairs_per_s'])}; "
            f"{r['gp_fits_while_measured']} GP fits while measured (GP ask p50 {r['gp_ask_ms_p50']} ms)"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def markdown(results: Sequence[dict[str, Any]], rs: Sequence[dict[str, Any]], command: str, machine: dict[str, Any]) -> str:
    kinds = (
        ("contention", "tauopt doors"),
        ("optuna", "Optuna ask/tell, same workload"),
        ("floor", "Transport floors (no engine behind)"),
        ("isolation", "Isolation (headline = with GP load)"),
    )
    out = [
        f"Command: `{command}`  ",
        f"Machine: {machine.get('cpus')} CPUs, load average {machine.get('loadavg')} at start, Python {machine.get('python')}, "
        f"optuna {machine.get('optuna')}. One pair = one ask + one observe.\n",
    ]
    shares = floor_shares(results)
    for kind, title in kinds:
        rows = [r for r in results if r.get("kind") == kind]
        if rows:
            out.append(f"**{title}**\n\n" + table(rows, shares if kind == "contention" else None))
    if rs:
        out.append("**tauopt / Optuna**\n\n" + ratio_table(rs))
    ts = targets(results, rs)
    if ts:
        out.append("**Targets (issue 16), this run**\n\n" + target_table(ts))
    iso = isolation_lines(results)
    if iso:
        out.append("**Isolation**\n\n" + iso)
    from _bench_gp import gp_lines  # the GP target: ask p95 over one fit, pairs/s over Optuna's GP

    gp = gp_lines(results)
    if gp:
        out.append("**GP**\n\n" + gp)
    return "\n".join(out)


def plot_cdfs(results: Sequence[dict[str, Any]], ask_s: dict[str, list[float]], path: Path) -> bool:
    """One panel per door: the ask-latency CDF of every configuration."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    doors: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if "error" not in r and ask_s.get(r["name"]):
            doors.setdefault(r["door"], []).append(r)
    if not doors:
        return False
    fig, axes = plt.subplots(1, len(doors), figsize=(5.5 * len(doors), 4.2), squeeze=False)
    for ax, (door, rows) in zip(axes[0], sorted(doors.items())):
        for r in rows:
            xs = sorted(1000 * x for x in ask_s[r["name"]])
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.plot(xs, ys, label=r["name"], linestyle="--" if r["kind"] == "floor" else "-")
        ax.set_xscale("log")
        ax.set_xlabel("ask latency (ms, log)")
        ax.set_ylabel("fraction of asks")
        ax.set_title(f"door: {door}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
