"""A deterministic simulation of the worker loop (issue 14): a simulated Kafka
and Faust consumer drive streams.worker.loop.WorkerLoop over the memory stores, with
crashes, rebalances, zombies, transient store errors and duplicates, all from
one seed."""
