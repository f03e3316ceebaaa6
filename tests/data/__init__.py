"""Checked-in test data."""
