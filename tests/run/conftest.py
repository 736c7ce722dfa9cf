"""Whole-run tests use the loopback fake model from tests/fakes."""
