"""Operators' procedures, independent of the command line that runs them:
replay and erasure of a tenant, the canonical export, the dry run, skipping a
paused record, and the demo."""
