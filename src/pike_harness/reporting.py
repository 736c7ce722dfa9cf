"""The reporter plugin interface: turn run stores and baselines into metrics, figures and tables.

Reporters read run directories (see docs/run-layout.md) and never write into them, so a report can be
made while a run is still going.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

FORMATS = ("html", "png", "svg", "csv", "tex")


@dataclass
class ReportOptions:
    inputs: list[Path]  # run directories, or folders that contain run directories
    output: Path
    runs: list[str] | None = None  # only these run names
    formats: tuple[str, ...] = FORMATS
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ReportSummary:
    """What the CLI prints after a report: where files went and the headline rows."""

    output: Path
    files: list[Path] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per run: name, geomean, ...


class Reporter(ABC):
    name: str = "reporter"
    description: str = ""
    # click.Option objects added to `pikeh report` when this reporter is chosen; values arrive in
    # ``ReportOptions.extra`` by parameter name. The host adds ``progress`` (a message callback) and,
    # for reporters that re-evaluate code, ``resolve_task(ref) -> Task``, ``make_evaluator() -> Evaluator``
    # (built from `pikeh report`'s evaluator options, as `pikeh eval` builds its own) and ``evaluation``
    # (those options' ``evaluator``, ``device`` and ``protocol``, for labels).
    options: ClassVar[list[Any]] = []

    @abstractmethod
    def report(self, options: ReportOptions) -> ReportSummary:
        """Write the report under ``options.output`` and return what was written."""
