"""The end-to-end benchmark's throughput plot, drawn with matplotlib (the
``bench`` extra): events visible in both stores against seconds since each
side's consumer was ready, for the last round of a run.

``bench/e2e.py`` draws it at the end of a run. To redraw it from a run's
recorded numbers (``bench/results/latest.json``) without running again::

    python -m bench.plot bench/results/latest.json docs/bench-throughput.png
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: The sides drawn, in this order, with their legend labels and colours (the
#: redstring sides warm, the ceiling grey, the peer blue). The Kafka ceiling is
#: left out: it is over in a fraction of a second.
SIDES: dict[str, tuple[str, str]] = {
    "ceiling": ("ceiling: direct writes, no Kafka", "#595959"),
    "redstring 1w": ("redstring, 1 worker", "#c8282a"),
    "redstring 2w": ("redstring, 2 workers", "#f08c14"),
    # bench/e2e.py --capacity PxW; from_report names its shape
    "capacity": ("redstring, capacity side", "#8c3cb4"),
    "quix": ("peer: Quix Streams sinks", "#285ac8"),
}
# Drawn at 800x440 pixels, the width a README or docs page shows it at, so the
# text is read at its own size rather than scaled down.
SIZE_INCHES = (8.0, 4.4)
DPI = 100


def last_round(sides: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """Side name -> its (seconds, events visible) points in the last round,
    starting from (0, 0), for the sides SIDES draws."""
    sides = list(sides)
    last = max((int(s["round"]) for s in sides), default=0)
    return {
        s["name"]: [(0.0, 0.0), *((float(t), float(d)) for t, d in s["timeline"])]
        for s in sides
        if int(s["round"]) == last and s["name"] in SIDES and s["timeline"]
    }


def throughput_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    path: Path,
    labels: Mapping[str, str] | None = None,
) -> None:
    """Events visible against time, one line per side: the slope is the
    throughput. ``labels`` overrides SIDES' legend labels."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, whatever the environment says
    import matplotlib.pyplot as plt

    with plt.rc_context({"font.size": 11, "axes.spines.top": False, "axes.spines.right": False}):
        fig, ax = plt.subplots(figsize=SIZE_INCHES, dpi=DPI, layout="constrained")
        for name in SIDES:
            if name not in series:
                continue
            label, colour = SIDES[name]
            label = (labels or {}).get(name, label)
            xs, ys = zip(*series[name], strict=True)
            ax.plot(xs, ys, label=label, color=colour, linewidth=2)
        ax.set_xlabel("seconds since the side's consumer was ready")
        ax.set_ylabel("events visible in both stores")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(True, color="#e1e1e1")
        ax.yaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("{x:,.0f}"))
        # Below the axes: every corner of the plot has a line in it.
        fig.legend(loc="outside lower center", ncols=2, frameon=False)
        fig.savefig(path)
        plt.close(fig)


def from_report(report: Mapping[str, Any], path: Path) -> bool:
    """Draw a run's plot from its report (latest.json); False if it has no timelines."""
    series = last_round(report.get("sides", []))
    labels = {}
    if capacity := report.get("capacity"):
        labels["capacity"] = (
            f"redstring, {capacity['workers']} workers, {capacity['partitions']} partitions"
        )
    if series:
        throughput_chart(series, path, labels)
    return bool(series)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a run's latest.json")
    parser.add_argument("out", type=Path, help="the PNG to write")
    args = parser.parse_args()
    if not from_report(json.loads(args.report.read_text()), args.out):
        raise SystemExit(f"{args.report}: no side has a timeline to plot")


if __name__ == "__main__":
    main()
