"""docs/operations.md lists exactly the metric families a worker serves on
/metrics, with their types and labels: a worker's registry, exercised so that
every family has samples, is rendered as /metrics renders it and parsed back
with prometheus_client's parser."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streams.worker.metrics import PAUSE_REASONS, SEEK_REASONS, STORES, Metrics, PartitionView

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"

#: A family: its name as queried (a counter's with `_total`), type, label names.
Family = tuple[str, str, frozenset[str]]

# The suffix a counter's samples carry in the exposition format.
COUNTER_SUFFIX = "_total"


def exercised() -> Metrics:
    """A worker's metrics with a sample in every family: one batch, one of each
    event, a paused partition with a rebuild window open in each store."""
    metrics = Metrics()
    metrics.batch_size.observe(10)
    metrics.batch_latency.observe(0.2)
    metrics.intake_bytes.observe(4096)
    metrics.dead_lettered.inc()
    metrics.store_retries.inc()
    windows = {store: [("tenant", 0, 9)] for store in STORES}
    metrics.show_partitions(
        [
            PartitionView(0, 10, dict.fromkeys(STORES, 3), windows, 0.5, PAUSE_REASONS[0]),
            PartitionView(1, 4, dict.fromkeys(STORES, 4)),
        ]
    )
    return metrics


@cache
def served() -> frozenset[Family]:
    text = generate_latest(exercised().registry).decode()
    families = set()
    for family in text_string_to_metric_families(text):
        name = family.name + (COUNTER_SUFFIX if family.type == "counter" else "")
        labels = {label for sample in family.samples for label in sample.labels} - {"le"}
        assert family.samples, f"{family.name} has no sample: exercise it above"
        families.add((name, family.type, frozenset(labels)))
    return frozenset(families)


def served_series() -> set[str]:
    """Every series name /metrics serves (a histogram's three, a counter's _total)."""
    names = set()
    for name, kind, _ in served():
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        else:
            names.add(name)
    return names


def documented() -> frozenset[Family]:
    """The rows of the table in docs/operations.md whose header starts
    `| Family | Type | Labels |`."""
    lines = OPERATIONS.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Family | Type | Labels |"))
    families = set()
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        name, kind, labels = (cell.strip() for cell in line.strip("|").split("|")[:3])
        families.add((name.strip("`"), kind, frozenset(re.findall(r"`([a-z_]+)`", labels))))
    return frozenset(families)


def test_the_operations_guide_lists_exactly_the_served_families() -> None:
    docs, live = documented(), served()
    assert not docs - live, f"documented but not served as such: {sorted(docs - live)}"
    assert not live - docs, f"served but not documented: {sorted(live - docs)}"


def test_the_standard_process_and_python_families_are_served() -> None:
    names = {name for name, _, _ in served()}
    for expected in ("process_resident_memory_bytes", "process_cpu_seconds_total", "python_info"):
        assert expected in names
    assert "redstring_build_info" in names


def test_names_follow_the_prometheus_conventions() -> None:
    """Counters end in _total and nothing else does; units are base units
    (seconds, bytes), never milliseconds or kilobytes; no label names a tenant."""
    for name, kind, labels in served():
        assert (kind == "counter") == name.endswith("_total"), name
        assert not re.search(r"_(ms|milliseconds|kb|mb|percent)(_|$)", name), name
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name), name
        assert "tenant" not in labels, name


def test_the_labels_have_bounded_values() -> None:
    text = generate_latest(exercised().registry).decode()
    values: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for label, value in sample.labels.items():
                values.setdefault(label, set()).add(value)
    assert values["store"] <= set(STORES)
    assert values["reason"] <= set(PAUSE_REASONS) | set(SEEK_REASONS)
    assert all(p.isdigit() for p in values["partition"])
