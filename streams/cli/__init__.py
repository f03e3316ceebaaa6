"""The ``redstring`` command line: one module per command group (``main`` says
which), each parsing options and printing, with the work done in streams.ops,
streams.kafka and streams.worker."""

from streams.cli.main import main

__all__ = ["main"]
