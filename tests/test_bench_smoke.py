"""Smoke test of the contention benchmark: its tiniest run prints one valid JSON
line per configuration, with every visible invariant holding. Speed is never
asserted here; benchmarks are programs, the README quotes their figures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def test_tiny_contention_run_prints_json_lines_with_invariants_holding(tmp_path: Path) -> None:
    out = tmp_path / "bench-out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "contention.py"), "--tiny", "--duration", "0.3", "--no-plot", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "TAUOPT_PROGRESS_DELAY": "0"},  # the bar shows at once, not after 3 s
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    by_kind: dict[str, list[dict]] = {}
    for line in lines:
        by_kind.setdefault(line["kind"], []).append(line)
    assert by_kind["machine"][0]["cpus"] >= 1
    doors = {r["door"] for r in by_kind["contention"]}
    assert doors == {"inproc", "http"}
    for r in by_kind["contention"]:
        assert r["pairs"] > 0 and r["pairs_per_s"] > 0, r
        assert r["errors"] == {}, r
        inv = r["invariants"]
        assert inv["ok"] and inv["duplicates"] == 0 and inv["assignments"] >= r["pairs"], r
        assert 1 <= inv["max_open_seen"] <= inv["bandwidth"] == r["workers"], r
        assert r["ask_ms"]["p50"] <= r["ask_ms"]["p99"] <= r["ask_ms"]["max"], r
    assert by_kind["floor"][0]["pairs"] > 0
    bar = re.search(r"contention: +\d+%\|[^|]*\| \d+/(\d+) ", proc.stderr)
    assert bar is not None, f"a progress bar on stderr (issue 20): {proc.stderr[-500:]!r}"
    assert int(bar.group(1)) == sum(1 for line in lines if line["kind"] not in ("machine", "ratio", "share", "target")), "one step per configuration run"
    if "optuna" in by_kind:  # the bench extra is installed: the comparison and its ratio are printed
        assert by_kind["optuna"][0]["pairs"] > 0
        assert by_kind["ratio"][0]["throughput_ratio"] > 0
    report = (out / "contention.md").read_text()
    assert "| inproc/memory/random/w8/e1 |" in report
    # each door row's share of the floor measured in its shape, in the table and as JSON
    assert "% of mailbox/w8 |" in report
    shares = {r["name"]: r for r in by_kind["share"]}
    assert shares["inproc/memory/random/w8/e1"]["floor"] == "floor/mailbox/w8"
    assert shares["inproc/memory/random/w8/e1"]["share"] > 0
    assert len((out / "contention.jsonl").read_text().splitlines()) == len(lines)


def test_tiny_early_stopping_run_prints_every_method_and_tauopt_matches_optuna_on_the_same_rule() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "early_stopping.py"), "--trials", "40", "--seeds", "1", "--workers", "8", "--max-step", "27"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TAUOPT_PROGRESS_DELAY": "0"},  # the bar shows at once, not after 3 s
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    methods = json.loads(proc.stdout)["methods"]
    bars = re.findall(r"early_stopping: +\d+%\|[^|]*\| (\d+)/(\d+) ", proc.stderr)
    assert bars, f"a progress bar on stderr (issue 20): {proc.stderr[-500:]!r}"
    assert max(int(done) for done, _ in bars) == int(bars[-1][1]) == len(methods), "one step per method and seed"
    assert len(re.findall(r"^seed 0 .*: steps \d+ regret", proc.stderr.replace("\r", "\n"), re.M)) == len(methods)
    assert methods["tauopt none"]["steps_mean"] == 40 * 27
    assert methods["tauopt asha"]["steps_mean"] < methods["tauopt none"]["steps_mean"]
    # Same rule, same curves, same order: the same decisions.
    assert methods["tauopt asha"] == methods["optuna SuccessiveHalvingPruner"]
    assert methods["tauopt median"] == methods["optuna MedianPruner"]


def test_tiny_report_latency_run_prints_one_line_per_rule() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "report_latency.py"), "--workers", "4", "--duration", "0.3", "--steps", "5", "--store", "memory"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TAUOPT_PROGRESS_DELAY": "0"},  # the bar shows at once, not after 3 s
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = {r["rule"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert set(lines) == {"none", "asha", "median"}
    assert re.search(r"report_latency: +100%\|[^|]*\| 3/3 ", proc.stderr), f"a progress bar, a step per rule: {proc.stderr[-500:]!r}"
    none = lines["none"]
    assert none["stopped"] == 0 and none["reports"] == none["trials"] * 5 > 0
    for r in lines.values():
        assert r["report_ms"]["p50"] <= r["report_ms"]["p99"] <= r["report_ms"]["max"]


def _engine_profile(*args: str) -> tuple[dict[str, Any], str]:
    """engine_profile.py with 2 workers x 3 pairs: its JSON line, and all it printed."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "engine_profile.py"), "--workers", "2", "--pairs", "3", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[0]), proc.stdout


def test_tiny_engine_profile_counts_the_engine_above_its_floor() -> None:
    head, out = _engine_profile("--top", "5")
    assert head["pairs"] == 6
    assert head["engine_bytecodes_per_pair"] > head["floor_bytecodes_per_pair"] > 0
    assert "| **total** |" in out


def test_tiny_engine_profile_cpu_times_both_runs_in_turn() -> None:
    head, _ = _engine_profile("--cpu", "2")
    assert (head["benchmark"], head["pairs"], head["rounds"]) == ("engine_profile_cpu", 6, 2)
    assert len(head["engine_runs"]) == len(head["floor_runs"]) == 2
    assert head["engine_cpu_us_per_pair"] > 0 and head["floor_cpu_us_per_pair"] > 0  # figures, not a speed check


def test_tiny_slot_handoff_answers_a_waiting_ask_before_the_retry_loop() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "slot_handoff.py"), "--rounds", "3"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's tauopt, not an installed one
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    wait, retry = (json.loads(line) for line in proc.stdout.splitlines())
    assert (wait["mode"], retry["mode"]) == ("wait", "retry") and wait["rounds"] == retry["rounds"] == 3
    assert 0 < wait["handoff_ms_median"] <= wait["handoff_ms_p90"]
    assert wait["handoff_ms_median"] < retry["handoff_ms_median"]  # the retry loop sleeps Retry-After (1 s) past the observe


def test_tiny_kerastuner_profile_gives_the_chiefs_and_the_floors_cpu_per_pair() -> None:
    """kerastuner_profile.py, one short round of the chief on the memory store and of the
    floor: a line per run, then the medians and the share of the floor they make."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kerastuner_profile.py"), "--rounds", "1", "--duration", "0.5", "--sides", "memory,floor"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    runs = {r["side"]: r for r in lines if r["kind"] == "kerastuner_cpu"}
    assert set(runs) == {"memory", "floor"}
    for r in runs.values():
        assert r["pairs"] > 0 and r["errors"] == {} and r["server_cpu_us_per_pair"] > 0, r  # figures, not a speed check
    (summary,) = [r for r in lines if r["kind"] == "kerastuner_cpu_median"]
    assert summary["memory_cpu_share_of_floor"] > 0 and summary["memory_pairs_share_of_floor"] > 0
