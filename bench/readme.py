"""Splice a benchmark run's summary (``bench/results/latest.md``, written by
``python -m bench.e2e``) into README.md's Performance section, between the
two markers below, instead of copying it by hand::

    python -m bench.readme [--results bench/results/latest.md] [--readme README.md]

Everything outside the markers is left as it is; the markers stay, so the
next run's summary replaces this one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = "<!-- begin bench/results/latest.md (python -m bench.readme) -->"
END = "<!-- end bench/results/latest.md -->"


class MarkersError(ValueError):
    """The README does not hold exactly one BEGIN marker followed by one END."""


def splice(readme: str, summary: str) -> str:
    """``readme`` with what lies between its markers replaced by ``summary``."""
    if readme.count(BEGIN) != 1 or readme.count(END) != 1:
        raise MarkersError(
            f"expected one {BEGIN!r} and one {END!r}; found {readme.count(BEGIN)} and "
            f"{readme.count(END)}"
        )
    head, rest = readme.split(BEGIN)
    if END not in rest:
        raise MarkersError(f"{END!r} comes before {BEGIN!r}")
    tail = rest.split(END)[1]
    body = summary.strip("\n")
    if BEGIN in body or END in body:
        raise MarkersError("the summary itself holds a marker")
    # Blank lines around the summary: its last table must end before the
    # marker, or a Markdown renderer may read the marker as one more row.
    return f"{head}{BEGIN}\n\n{body}\n\n{END}{tail}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "latest.md")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    args = parser.parse_args(argv)
    try:
        text = splice(args.readme.read_text(), args.results.read_text())
    except (OSError, MarkersError) as exc:
        raise SystemExit(f"bench.readme: {exc}") from None
    args.readme.write_text(text)
    print(f"{args.readme}: spliced in {args.results}")


if __name__ == "__main__":
    main()
