"""Fixtures for the Ray evaluator tests: a real Ray cluster on loopback (``make_cluster``).

The cluster tests skip, with the reason, where Ray is not installed (it is an optional extra:
``pip install 'pike-harness[ray]'``). Nodes are CPU-only: each declares one ``pikeh_device`` (the
stand-in for one whole GPU), and candidates run on ``--device cpu`` with the ``quick`` protocol.
Helpers and candidates live in ray_cases.py, the cluster in ray_cluster.py.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ray_cases import kill_leftovers  # noqa: E402
from ray_cluster import LoopbackCluster  # noqa: E402


@pytest.fixture
def make_cluster() -> Iterator[Callable[..., LoopbackCluster]]:
    """``make_cluster(head_cpus, nodes={"n2": cpus})``: a started loopback cluster, stopped afterwards."""
    made: list[LoopbackCluster] = []

    def make(head_cpus: int = 2, nodes: dict[str, int] | None = None) -> LoopbackCluster:
        cluster = LoopbackCluster()
        made.append(cluster)
        cluster.start_head(cpus=head_cpus)
        for name, cpus in (nodes or {}).items():
            cluster.add_node(name, cpus=cpus)
        return cluster

    yield make
    for cluster in made:
        cluster.stop()
        kill_leftovers(cluster.root)
        shutil.rmtree(cluster.root, ignore_errors=True)
