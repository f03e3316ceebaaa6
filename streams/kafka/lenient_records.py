"""Records whose header names are not UTF-8, read instead of refused.

Kafka's protocol makes a header name a UTF-8 string, but nothing checks it:
librdkafka's C API (kcat, confluent-kafka-go), franz-go and sarama send
whatever bytes a producer gives (confluent-kafka's Python client does not).
aiokafka decodes the names strictly, in its C record reader and in its
Python one alike, so one such record raised ``UnicodeDecodeError`` inside
the fetcher, which crashed Faust's consumer: the worker stopped applying,
and every worker after it stopped at the same record, with no dead letter
to say why. redstring reads one header, ``traceparent``, and only when
tracing is on; a name that is not UTF-8 is read here with
``surrogateescape`` (the bytes kept, the name never equal to a real one)
and the event goes on as if the header were not there.

``install()`` makes the consumer's fetcher read record batches with
aiokafka's Python reader over a buffer whose slices decode leniently (the
pinned aiokafka 0.14: ``aiokafka.consumer.fetcher.MemoryRecords`` and
``aiokafka.record.memory_records.DefaultRecordBatch``). The Python reader
costs about 16 us a record more than the C one (26 against 9.5 for a
37 KB event), a few thousandths of the worker's CPU per event. Only the
worker installs it; the legacy formats (magic 0 and 1) have no headers.
"""

from __future__ import annotations

from typing import Any, SupportsIndex, overload

from aiokafka.consumer import fetcher
from aiokafka.record import memory_records
from aiokafka.record.default_records import _DefaultRecordBatchPy


class _LenientBytes(bytes):
    """A header name's bytes: decoding keeps what is not UTF-8."""

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return bytes.decode(self, encoding, "surrogateescape")


class _LenientBuffer(bytearray):
    """A batch's buffer whose slices decode leniently (indexing is unchanged)."""

    @overload
    def __getitem__(self, index: SupportsIndex) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> bytearray: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        item = bytearray.__getitem__(self, index)
        return _LenientBytes(item) if isinstance(index, slice) else item


class LenientRecordBatch(_DefaultRecordBatchPy):  # type: ignore[misc]
    """aiokafka's Python v2 batch reader, over a lenient buffer."""

    def __init__(self, buffer: bytes | bytearray | memoryview) -> None:
        super().__init__(buffer)
        self._buffer: bytearray = _LenientBuffer(self._buffer)

    def _maybe_uncompress(self) -> None:
        super()._maybe_uncompress()  # a compressed batch gets a new buffer
        if not isinstance(self._buffer, _LenientBuffer):
            self._buffer = _LenientBuffer(self._buffer)


def install() -> None:
    """Make the consumer's fetcher read batches with ``LenientRecordBatch``."""
    memory_records.DefaultRecordBatch = LenientRecordBatch
    fetcher.MemoryRecords = memory_records._MemoryRecordsPy


def installed() -> bool:
    return (
        fetcher.MemoryRecords is memory_records._MemoryRecordsPy
        and memory_records.DefaultRecordBatch is LenientRecordBatch
    )
