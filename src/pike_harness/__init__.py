"""pike-harness: compare LLM-driven strategies that rewrite PyTorch models into faster kernels.

This module imports nothing heavy on purpose: ``pike_harness.worker`` must import on a bare GPU host
or container that has only torch, and the CLI must start fast.
"""

from __future__ import annotations

try:
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("pike-harness")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
