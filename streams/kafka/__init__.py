"""Kafka I/O shared by the worker, the SDK and the tools: client configuration
and credentials (``config``, ``oauth``), topics, the tenant-to-partition map
(``partitioning``), an asyncio producer, the dead-letter topic, and a probe for
the next offset of a partition."""
