"""Decode cost and bytes per event, by embedding encoding, and the JSON parsers
side by side: ``python -m bench.decode``.

The events are bench/e2e.py's (``bench.workload``: 5-20 entities, each with a
384-dimension embedding), each in three encodings:

* ``list (4 digits)``: the workload as written, components rounded to 4
  decimals (``0.1234``): the shortest text a list can be;
* ``list (float32)``: the list the Publisher sends for a model's float32
  output, each component written as the shortest float that reads back as
  that float32 widened (``0.12339999526739120``-like);
* ``embedding_b64``: ``Publisher(compact_embeddings=True)``.

Decode CPU is ``contracts.events.parse_event`` (what ``streams.worker.decode``
spends on a value), by ``time.process_time``, the encodings interleaved round
by round and the best round kept, so that other processes on the machine
count least. The parser comparison times the envelope's parse alone on the
``list (float32)`` events: pydantic's ``validate_json`` (what ``parse_event``
does first), and msgspec and orjson each followed by pydantic's
``validate_python``, when they are installed; then it reports how many cases
of the hostile corpus each candidate judges differently from ``parse_event``
(accepted versus refused), which is what decides whether it could replace it.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

from bench.workload import generate, render, tenant_names
from contracts.errors import InvalidEventError, SchemaVersionTooNewError
from contracts.events import (
    EVENT_ADAPTER,
    DocumentExtractedEvent,
    event_to_json,
    parse_event,
)
from contracts.validation import float32_le_base64, float32_le_components


def _float32_list(value: bytes) -> bytes:
    """``value`` with every embedding replaced by its float32 values, as the
    Publisher writes them (a JSON list of the widened floats)."""
    event = parse_event(value)
    if not isinstance(event, DocumentExtractedEvent):
        return value
    entities = [
        e
        if e.embedding is None
        else e.model_copy(
            update={
                "embedding": float32_le_components(
                    float32_le_base64(e.embedding), "embedding_b64", 4096
                )
            }
        )
        for e in event.payload.entities
    ]
    payload = event.payload.model_copy(update={"entities": entities})
    return event_to_json(event.model_copy(update={"payload": payload}))


def encodings(events: int, seed: int) -> dict[str, list[bytes]]:
    workload = generate(seed, tenants=4, events=events)
    names = tenant_names("bench", 4, 12)
    written = [render(e, names)[1] for e in workload.events if e.kind == "DocumentExtracted"]
    as_float32 = [_float32_list(v) for v in written]
    compact = [event_to_json(parse_event(v), compact_embeddings=True) for v in as_float32]
    return {"list (4 digits)": written, "list (float32)": as_float32, "embedding_b64": compact}


def cpu_per_value(call: Callable[[bytes], object], values: Sequence[bytes]) -> float:
    start = time.process_time()
    for value in values:
        call(value)
    return (time.process_time() - start) / len(values)


def best_of(
    rounds: int, candidates: dict[str, tuple[Callable[[bytes], object], Sequence[bytes]]]
) -> dict[str, float]:
    """Each candidate's best seconds per value over ``rounds``, interleaved."""
    best = dict.fromkeys(candidates, float("inf"))
    for _ in range(rounds):
        for name, (call, values) in candidates.items():
            best[name] = min(best[name], cpu_per_value(call, values))
    return best


def parsers() -> dict[str, Callable[[bytes], object]]:
    found: dict[str, Callable[[bytes], object]] = {
        "parse_event (validate_json, member count)": parse_event,
        "pydantic validate_json": EVENT_ADAPTER.validate_json,
    }
    try:
        import orjson

        found["orjson + validate_python"] = lambda v: EVENT_ADAPTER.validate_python(orjson.loads(v))
    except ImportError:
        print("orjson is not installed: not compared")
    try:
        import msgspec

        decoder = msgspec.json.Decoder()
        found["msgspec + validate_python"] = lambda v: EVENT_ADAPTER.validate_python(
            decoder.decode(v)
        )
    except ImportError:
        print("msgspec is not installed: not compared")
    return found


def accepted(call: Callable[[bytes], object], value: bytes | None) -> bool:
    if value is None:
        return False
    try:
        call(value)
    except (InvalidEventError, SchemaVersionTooNewError, ValueError):
        return False
    except Exception:  # a crash is a verdict too, and not parse_event's
        return False
    return True


def disagreements(candidates: dict[str, Callable[[bytes], object]]) -> dict[str, list[str]]:
    """Hostile-corpus cases a candidate accepts and parse_event refuses, or
    the reverse (the envelope alone: keys and partitions are not judged)."""
    from tests.data.hostile import load_cases

    cases = load_cases()
    truth = {c.name: accepted(parse_event, c.value) for c in cases}
    return {
        name: [c.name for c in cases if accepted(call, c.value) != truth[c.name]]
        for name, call in candidates.items()
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=300, help="events generated (default 300)")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds, best kept (default 5)")
    ap.add_argument("--seed", type=int, default=20)
    args = ap.parse_args(argv)

    values = encodings(args.events, args.seed)
    base = "list (float32)"
    for name, encoded in values.items():  # every encoding is the same events
        assert [parse_event(v) for v in encoded] == [parse_event(v) for v in values[base]] or (
            name == "list (4 digits)"
        )
    cpu = best_of(args.rounds, {name: (parse_event, vs) for name, vs in values.items()})
    n = len(values[base])
    print(f"{n} DocumentExtracted events, best of {args.rounds} rounds (CPU time)\n")
    print(f"| encoding | bytes/event | ÷ {base} | parse_event µs/event | ÷ {base} |")
    print("|---|---|---|---|---|")
    for name, encoded in values.items():
        size = sum(map(len, encoded)) / n
        size_base = sum(map(len, values[base])) / n
        print(
            f"| {name} | {size:,.0f} | {size / size_base:.2f} | "
            f"{cpu[name] * 1e6:,.0f} | {cpu[name] / cpu[base]:.2f} |"
        )

    found = parsers()
    timed = best_of(args.rounds, {name: (call, values[base]) for name, call in found.items()})
    differ = disagreements(found)
    first = "pydantic validate_json"
    print(f"\nparsing the envelope ({base} events)\n")
    print(f"| parser | µs/event | ÷ {first} | hostile cases judged differently |")
    print("|---|---|---|---|")
    for name in found:
        wrong = differ[name]
        cases = ", ".join(wrong[:3]) + (", ..." if len(wrong) > 3 else "")
        print(
            f"| {name} | {timed[name] * 1e6:,.0f} | {timed[name] / timed[first]:.2f} | "
            f"{len(wrong)}{': ' + cases if wrong else ''} |"
        )


if __name__ == "__main__":
    main()
