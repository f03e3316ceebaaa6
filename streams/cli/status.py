"""``redstring status``: lag per partition, once or refreshed in place."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from streams.cli.output import Format, output_option, print_json
from streams.settings import Settings

if TYPE_CHECKING:
    from streams.ops.status import Status, Throughput
    from streams.wiring import Stores

#: How --watch waits between readings (a test makes it stop the loop).
pause = asyncio.sleep


@click.command("status", short_help="Lag per partition, checkpoints and rebuild windows.")
@output_option
@click.option(
    "--watch",
    is_flag=True,
    help="Redraw every --interval seconds, with records/s per partition; Ctrl-C stops.",
)
@click.option(
    "--interval", type=click.FloatRange(0.5), default=2.0, help="Seconds (2) between readings."
)
def status_command(output: Format, watch: bool, interval: float) -> None:
    """Lag per partition: the log end, the group's committed offset and each
    store's checkpoint, plus open rebuild windows.

    With --watch the table is redrawn in place, adding how many records per
    second reach each partition (from successive log ends) and how many both
    stores apply (from successive checkpoints); with -o json each reading is
    one document on its own line.
    """
    from streams.kafka.topics import TopicError

    settings = Settings()
    try:
        asyncio.run(_watch(settings, output, interval) if watch else _once(settings, output))
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        # Ctrl-C is how --watch ends: the last reading stays on the screen.
        pass


async def _once(settings: Settings, output: Format) -> None:
    from streams.ops.status import read_status

    async with _stores(settings) as stores:
        status = await read_status(settings, stores)
    if output == "json":
        print_json(document(status, None))
    else:
        _table(status, None)


async def _watch(settings: Settings, output: Format, interval: float) -> None:
    from streams.kafka.topics import TopicClients
    from streams.ops.status import read_status, throughput

    # One pair of Kafka clients for every reading, not a new pair per tick.
    clients = await asyncio.to_thread(TopicClients, settings)
    try:
        async with _stores(settings) as stores:
            before = None
            while True:
                status = await read_status(settings, stores, clients)
                rates = None if before is None else throughput(before, status)
                if output == "json":
                    print_json(document(status, rates), compact=True)
                else:
                    click.clear()
                    click.echo(
                        f"{status.topic} (group {status.group_id}), every {interval:g}s; "
                        "Ctrl-C to stop\n"
                    )
                    _table(status, rates if rates is not None else {})
                before = status
                await pause(interval)
    finally:
        await asyncio.to_thread(clients.close)


@asynccontextmanager
async def _stores(settings: Settings) -> AsyncIterator[Stores]:
    from streams.wiring import open_stores

    stores = await open_stores(settings)
    try:
        yield stores
    finally:
        await stores.aclose()


def document(status: Status, rates: dict[int, Throughput] | None) -> dict[str, Any]:
    """The JSON form (docs/operations.md): ``throughput`` is null until two
    readings give a rate."""
    rows = []
    for p in status.partitions:
        rate = None if rates is None else rates.get(p.partition)
        rows.append(
            {
                "partition": p.partition,
                "log_end": p.log_end,
                "committed": p.committed if p.committed >= 0 else None,
                "graph": p.graph,
                "vector": p.vector,
                "lag": p.lag,
                "rebuilding": [asdict(w) for w in p.rebuilding],
                "throughput": None
                if rate is None
                else {"appended_per_s": rate.appended, "applied_per_s": rate.applied},
            }
        )
    return {
        "topic": status.topic,
        "topic_id": status.topic_id,
        "group_id": status.group_id,
        "partitions": rows,
    }


def _table(status: Status, rates: dict[int, Throughput] | None) -> None:
    """Today's table; with ``rates`` (watching) two more columns."""
    extra = "" if rates is None else f" {'in/s':>8} {'applied/s':>9}"
    click.echo(
        f"{'partition':>9} {'log end':>9} {'committed':>9} {'graph':>9} "
        f"{'vector':>9} {'lag':>7}{extra}  rebuilding"
    )
    for r in status.partitions:
        c = r.committed if r.committed >= 0 else "-"
        if rates is not None:
            rate = rates.get(r.partition)
            extra = (
                f" {'-':>8} {'-':>9}"
                if rate is None
                else f" {rate.appended:>8.1f} {rate.applied:>9.1f}"
            )
        windows = ", ".join(f"{w.tenant} {w.done}/{w.total}" for w in r.rebuilding)
        click.echo(
            f"{r.partition:>9} {r.log_end:>9} {c:>9} {r.graph:>9} {r.vector:>9} "
            f"{r.lag:>7}{extra}  {windows}"
        )
