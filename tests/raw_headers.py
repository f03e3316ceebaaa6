"""Header names of any bytes, as librdkafka's C API, franz-go or sarama send
them. No Python client sends one on its own: confluent-kafka turns a bytes
name into its ``str()``, and aiokafka encodes a ``str`` name as UTF-8. A
``RawName`` is a ``str`` whose encoding is the bytes it was made from, and
aiokafka's Python batch builder (which calls ``name.encode``) writes them as
they are."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

from aiokafka.producer import message_accumulator, producer
from aiokafka.record.default_records import _DefaultRecordBatchBuilderPy


class RawName(str):
    """A header name whose bytes on the wire are ``raw``."""

    raw: bytes

    def __new__(cls, raw: bytes) -> RawName:
        name = str.__new__(cls, raw.decode("utf-8", "surrogateescape"))
        name.raw = raw
        return name

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return self.raw


@contextmanager
def aiokafka_sends_raw_names() -> Iterator[None]:
    """aiokafka's producers, within, build batches with the Python builder."""
    with (
        mock.patch.object(
            message_accumulator, "DefaultRecordBatchBuilder", _DefaultRecordBatchBuilderPy
        ),
        mock.patch.object(producer, "DefaultRecordBatchBuilder", _DefaultRecordBatchBuilderPy),
    ):
        yield
