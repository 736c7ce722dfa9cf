"""The eval worker: loads, checks and times one candidate in a process of its own.

This package is the one part of pike-harness that runs on GPU hosts and in containers, so it imports
only torch, triton (when present) and the standard library. Nothing here may import click, rich,
duckdb or any plugin.
"""
