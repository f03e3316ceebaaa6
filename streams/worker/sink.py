"""Where the worker's dead letters go: ``<topic>.dlq``, each with headers
saying why it was refused and where it came from (streams.kafka.dead_letters
reads them back)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from streams.kafka.dead_letters import REASON, SOURCE_OFFSET, SOURCE_PARTITION, SOURCE_TOPIC
from streams.kafka.producer import AsyncProducer, Headers
from streams.settings import Settings
from streams.worker.projector import DeadLetter

#: librdkafka's cap on one dead letter (its default, 1,000,000, is below the
#: broker's 1,048,588 default: a value the events topic took could not be
#: written here).
MAX_LETTER_BYTES = 64 << 20


def letter_headers(topic: str, letter: DeadLetter) -> Headers:
    return [
        (REASON, letter.reason.encode("utf-8")),
        (SOURCE_TOPIC, topic.encode()),
        (SOURCE_PARTITION, str(letter.partition).encode()),
        (SOURCE_OFFSET, str(letter.offset).encode()),
    ]


class KafkaDeadLetterSink:
    def __init__(self, settings: Settings) -> None:
        self.topic = settings.topic
        self.dlq_topic = settings.dlq_topic
        # A dead letter repeats the refused value byte for byte, and a value
        # is refused for being over the event size limit too: librdkafka's
        # own default cap (1,000,000 bytes) refused to write such a letter,
        # and the partition waited on it forever (tests/e2e/test_hostile_corpus.py).
        # The broker's limit on <topic>.dlq is the one that counts.
        self._producer = AsyncProducer(settings, **{"message.max.bytes": MAX_LETTER_BYTES})

    async def send(self, letters: Sequence[DeadLetter]) -> None:
        futures = [
            self._producer.send(self.dlq_topic, d.key, d.value, letter_headers(self.topic, d))
            for d in letters
        ]
        await asyncio.gather(*futures)

    def close(self) -> None:
        self._producer.close()
