"""bench/plot.py: the end-to-end benchmark's throughput plot, from a run's
recorded report, at the size the README shows it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.plot import DPI, SIDES, SIZE_INCHES, from_report, last_round

matplotlib = pytest.importorskip("matplotlib")  # the bench extra

ROOT = Path(__file__).resolve().parents[2]


def report() -> dict[str, Any]:
    def side(name: str, rnd: int, rate: float) -> dict[str, object]:
        return {"name": name, "round": rnd, "timeline": [[t, int(t * rate)] for t in (1, 2, 3)]}

    return {
        "sides": [
            side("ceiling", 1, 50.0),
            side("ceiling", 2, 100.0),
            side("redstring 1w", 2, 40.0),
            side("kafka", 2, 5000.0),  # over in a blink: not drawn
        ]
    }


def test_the_last_round_of_the_drawn_sides_from_zero() -> None:
    series = last_round(report()["sides"])
    assert set(series) == {"ceiling", "redstring 1w"} <= set(SIDES)
    assert series["ceiling"] == [(0.0, 0.0), (1.0, 100.0), (2.0, 200.0), (3.0, 300.0)]


def test_the_plot_is_drawn_at_readme_width(tmp_path: Path) -> None:
    from matplotlib import image

    out = tmp_path / "throughput.png"
    assert from_report(report(), out)
    height, width, _ = image.imread(out).shape
    assert (width, height) == (800, 440)
    assert (round(SIZE_INCHES[0] * DPI), round(SIZE_INCHES[1] * DPI)) == (800, 440)
    assert not from_report({"sides": []}, tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_the_command_redraws_from_latest_json(tmp_path: Path) -> None:
    latest = tmp_path / "latest.json"
    latest.write_text(json.dumps(report()))
    out = tmp_path / "plot.png"
    result = subprocess.run(
        [sys.executable, "-m", "bench.plot", str(latest), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes().startswith(b"\x89PNG")


def test_the_docs_plot_is_matplotlib_s() -> None:
    """docs/bench-throughput.png, which README.md and docs/performance.md show,
    is drawn by bench/plot.py, not by hand."""
    from PIL import Image

    with Image.open(ROOT / "docs" / "bench-throughput.png") as png:
        assert png.size == (800, 440)
        assert "matplotlib" in png.info.get("Software", "")
    assert "docs/bench-throughput.png" in (ROOT / "README.md").read_text()
    assert not (ROOT / "bench" / "png.py").exists()
