"""``redstring replay`` and ``redstring erase``."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING

import click

from contracts.ids import TenantId
from streams.cli.output import Format, note, output_option, print_json
from streams.cli.prompts import confirm, operator, parse_tenant
from streams.settings import Settings

if TYPE_CHECKING:
    from streams.ops.replay import Target


@click.command("replay", short_help="Rebuild one tenant from the start of the log.")
@click.option("--tenant", "tenant", required=True, help="The tenant to rebuild.")
@click.option("--offline", is_flag=True, help="The workers are stopped: do the work here.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@output_option
def replay_command(tenant: str, offline: bool, yes: bool, output: Format) -> None:
    """Rebuild the tenant given by --tenant in both stores from the start of the log.

    Online (default): publishes a signed TenantReplayRequested; the running
    workers delete the tenant, rescan its partition and re-apply its history,
    while this command shows their progress. Other tenants are never rolled
    back; those sharing the partition see a delay while it is rescanned.

    Offline (--offline): with the workers stopped, deletes the tenant in both
    stores, verifies nothing of it remains, opens the rebuild windows and
    rewinds the consumer group; start the workers afterwards.
    """
    from streams.ops.replay import ReplayRefused

    settings = Settings()
    tenant_ = parse_tenant(tenant)
    target = _locate(settings, tenant_)
    where = f"{target.partition.topic}[{target.partition.partition}]"
    confirm(
        f"Delete and rebuild tenant {tenant_} from {where} "
        f"({target.log_end - target.log_start} records to rescan)?",
        yes,
    )
    started = time.monotonic()
    try:
        if offline:
            asyncio.run(_offline(settings, target))
            request, counts = None, None
        else:
            request, counts = asyncio.run(_online(settings, target, output))
    except ReplayRefused as exc:
        raise click.ClickException(str(exc)) from None
    seconds = time.monotonic() - started
    if output == "json":
        print_json(
            {
                "tenant": tenant_,
                "mode": "offline" if offline else "online",
                **_place(target),
                "log_start": target.log_start,
                "log_end": target.log_end,
                "request_offset": request,
                "seconds": round(seconds, 3),
                "counts": counts,
            }
        )
    elif counts is None:
        click.echo(
            f"tenant {tenant_} deleted in both stores and {_where(target)} rewound to "
            f"{target.log_start}. Start the workers (redstring worker) to rebuild it."
        )
    else:
        click.echo(
            f"rebuilt {tenant_} in {seconds:.1f}s: "
            + ", ".join(f"{n} {k}" for k, n in counts.items())
        )


def _locate(settings: Settings, tenant: TenantId) -> Target:
    """The tenant's partition and its offsets, warning when the log no longer
    starts at 0."""
    from streams.kafka.topics import TopicError
    from streams.ops.replay import locate

    try:
        target = locate(settings, tenant)
    except TopicError as exc:
        raise click.ClickException(str(exc)) from None
    if target.log_start > 0:
        click.secho(
            f"warning: {_where(target)} no longer starts at offset 0 (it starts at "
            f"{target.log_start}); events older than that are gone and cannot be re-applied.",
            fg="yellow",
            err=True,
        )
    return target


def _where(target: Target) -> str:
    return f"{target.partition.topic}[{target.partition.partition}]"


def _place(target: Target) -> dict[str, str | int]:
    return {"topic": target.partition.topic, "partition": target.partition.partition}


async def _offline(settings: Settings, target: Target) -> None:
    from streams.ops.replay import offline_rebuild
    from streams.wiring import open_stores

    stores = await open_stores(settings)
    try:
        await offline_rebuild(settings, stores, target)
    finally:
        await stores.aclose()


async def _online(settings: Settings, target: Target, output: Format) -> tuple[int, dict[str, int]]:
    """Publish the request, then show the workers' progress until the rebuild
    window closes: the request's offset and what the tenant holds then."""
    from streams.ops.replay import publish_control, summary, window_progress
    from streams.wiring import open_stores

    tenant = target.tenant
    stores = await open_stores(settings)
    try:
        request = await publish_control(settings, "TenantReplayRequested", tenant, operator())
        note(output, f"replay requested at {_where(target)}@{request.offset}")
        with click.progressbar(
            length=max(1, request.offset - target.log_start),
            label="rescanning",
            file=sys.stderr,
        ) as bar:
            shown = 0
            while True:
                progress = await window_progress(stores, target, request)
                bar.update(max(0, progress.done - shown))
                shown = max(shown, progress.done)
                if progress.finished:
                    break
                await asyncio.sleep(0.5)
        counts = await summary(stores.graph, stores.vector, tenant)
    finally:
        await stores.aclose()
    return request.offset, counts


@click.command("erase", short_help="Erase one tenant from both stores, for good.")
@click.option("--tenant", "tenant", required=True, help="The tenant to erase.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@output_option
def erase_command(tenant: str, yes: bool, output: Format) -> None:
    """Erase the tenant given by --tenant from both stores, for good.

    Publishes a signed TenantErased and waits until both stores have deleted the
    tenant and recorded the erasure; no later replay or rebuild brings its older
    events back. Kafka itself still holds those events until the topic's
    retention removes them (unlimited by default): erasing them from the log
    needs a new topic and a rebuild.
    """
    from streams.ops.replay import ReplayRefused, publish_control, wait_for_erasure
    from streams.wiring import open_stores

    settings = Settings()
    tenant_ = parse_tenant(tenant)
    confirm(f"Erase tenant {tenant_} from both stores? This cannot be undone.", yes)

    async def run() -> None:
        request = await publish_control(settings, "TenantErased", tenant_, operator())
        where = f"{request.topic}[{request.partition}]@{request.offset}"
        note(output, f"erasure requested at {where}")
        stores = await open_stores(settings)
        try:
            await wait_for_erasure(stores, tenant_, request)
        finally:
            await stores.aclose()
        if output == "json":
            print_json(
                {
                    "tenant": tenant_,
                    "topic": request.topic,
                    "partition": request.partition,
                    "request_offset": request.offset,
                    "erased": True,
                }
            )
        else:
            click.echo(f"tenant {tenant_} erased from both stores.")

    try:
        asyncio.run(run())
    except ReplayRefused as exc:
        raise click.ClickException(str(exc)) from None
