"""Header names that are not UTF-8 (streams.kafka.lenient_records).

aiokafka's readers refuse them, which crashed the worker's fetcher; the
lenient reader returns every record as the producer wrote it, names decoded
with surrogateescape. The batches are built with aiokafka's Python builder,
handed names whose bytes are whatever the test draws (tests/raw_headers.py).
tests/e2e/test_workers.py sends such records to a real worker."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from aiokafka.consumer import fetcher
from aiokafka.record.default_records import DefaultRecordBatch, _DefaultRecordBatchBuilderPy
from aiokafka.structs import TopicPartition
from hypothesis import given
from hypothesis import strategies as st

from streams.kafka import lenient_records
from streams.kafka.lenient_records import LenientRecordBatch
from tests.raw_headers import RawName
from tests.unit.streams.conftest import BuildWorker

Header = tuple[bytes, bytes | None]
Record = tuple[bytes | None, bytes | None, list[Header]]

CODECS = {"none": 0, "gzip": 1}


def batch(records: Sequence[Record], codec: str = "none", base: int = 0) -> bytes:
    builder = _DefaultRecordBatchBuilderPy(
        magic=2,
        compression_type=CODECS[codec],
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 24,
    )
    for delta, (key, value, headers) in enumerate(records):
        named = [(RawName(name), header) for name, header in headers]
        builder.append(delta, timestamp=1_700_000_000_000, key=key, value=value, headers=named)
    raw = builder.build()
    raw[0:8] = base.to_bytes(8, "big")  # the base offset, outside the CRC
    return bytes(raw)


def read(reader: type, raw: bytes) -> list[tuple[int, bytes | None, bytes | None, list[Header]]]:
    return [
        (
            r.offset,
            r.key,
            r.value,
            [(name.encode("utf-8", "surrogateescape"), value) for name, value in r.headers],
        )
        for r in reader(raw)
    ]


NOT_UTF8: list[Header] = [(b"\xff\xfe", b"x"), (b"ok", None), (b"\xc3\x28", b"")]


def test_the_pinned_aiokafka_refuses_a_header_name_that_is_not_utf8() -> None:
    # Why the lenient reader exists; an aiokafka that reads such names fails
    # here, and lenient_records can go.
    with pytest.raises(UnicodeDecodeError):
        list(DefaultRecordBatch(batch([(b"k", b"v", NOT_UTF8)])))


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_the_lenient_reader_returns_the_record_and_its_header_bytes(codec: str) -> None:
    raw = batch([(b"acme", b"{}", []), (b"acme", b"{...}", NOT_UTF8), (None, None, [])], codec, 40)
    assert LenientRecordBatch(raw).validate_crc()
    assert read(LenientRecordBatch, raw) == [
        (40, b"acme", b"{}", []),
        (41, b"acme", b"{...}", NOT_UTF8),
        (42, None, None, []),
    ]
    # Names are str, as aiokafka hands them over: never equal to a real name.
    second = list(LenientRecordBatch(raw))[1].headers
    assert [name for name, _ in second] == ["\udcff\udcfe", "ok", "\udcc3("]


records = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=200),
        st.lists(st.tuples(st.binary(max_size=12), st.none() | st.binary(max_size=30)), max_size=4),
    ),
    min_size=1,
    max_size=8,
)


@given(records, st.sampled_from(sorted(CODECS)))
def test_any_bytes_in_any_field_come_back_as_they_were_sent(
    drawn: list[Record], codec: str
) -> None:
    raw = batch(drawn, codec)
    assert read(LenientRecordBatch, raw) == [
        (offset, key, value, headers) for offset, (key, value, headers) in enumerate(drawn)
    ]


def test_the_fetcher_hands_over_every_record_once_installed() -> None:
    # install() rebinds module globals for the process; conftest.py puts
    # them back after each test.
    assert not lenient_records.installed()
    lenient_records.install()
    assert lenient_records.installed()
    tp = TopicPartition("events", 0)
    raw = batch([(b"acme", b"1", []), (b"acme", b"2", NOT_UTF8)], "gzip", 7)
    raw += batch([(b"acme", b"3", NOT_UTF8)], "none", 9)
    partition = fetcher.PartitionRecords(
        tp, fetcher.MemoryRecords(raw), [], 7, None, None, True, fetcher.READ_UNCOMMITTED
    )
    handed = [(r.offset, r.value, len(r.headers)) for r in partition]
    assert handed == [(7, b"1", 0), (8, b"2", 3), (9, b"3", 3)]
    assert partition.next_fetch_offset == 10


def test_the_worker_installs_it(build_worker: BuildWorker) -> None:
    assert not lenient_records.installed()
    build_worker()
    assert lenient_records.installed()
