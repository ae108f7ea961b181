"""The scaling benchmarks' output: their sizes measured in turn, the JSON (machine, date,
command) and the curves as one PNG of log-log panels, one per measure, the size on x."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence


def measure_sizes(sizes: str, measure: Callable[[int], dict[str, Any]]) -> list[dict[str, Any]]:
    """`measure(n)` for each comma-separated size, each result also on stderr as it comes."""
    out = []
    for n in (int(s) for s in sizes.split(",")):
        out.append(measure(n))
        print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def emit(benchmark: str, sizes: list[dict[str, Any]], out_path: str | None, png: str | None,
         plot: Callable[[dict[str, Any], str], None]) -> None:  # fmt: skip
    """Print the JSON (also to `out_path`), and draw it to `png` with `plot`."""
    out = {
        "benchmark": benchmark,
        "machine": {"cpus": os.cpu_count(), "platform": sys.platform},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join([f"benchmarks/{benchmark}.py", *sys.argv[1:]]),
        "sizes": sizes,
    }
    text = json.dumps(out, indent=1)
    if png:
        plot(out, png)
    if out_path:
        Path(out_path).write_text(text + "\n")
    print(text)


def plot_curves(path: str | Path, title: str, xlabel: str, panels: Sequence[tuple[str, dict[str, list[tuple[float, float]]], float | None]]) -> None:
    """`panels`: (y label, {series name: [(x, y), ...]}, goal or None: a dashed line).
    Points with y <= 0 or missing are left out (a log scale cannot show them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (ylabel, series, goal) in zip(axes[0], panels):
        for name, points in series.items():
            pts = [(x, y) for x, y in points if x and y is not None and y > 0]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        if goal is not None:
            ax.axhline(goal, linestyle="--", color="grey", linewidth=1, label="goal")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
