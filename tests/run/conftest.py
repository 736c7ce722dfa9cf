"""Whole-run tests use the loopback fake model from pike_harness.testing."""
