"""The reporter plugin interface: turn run stores and baselines into metrics, figures and tables.

Reporters read run directories (see docs/run-layout.md) and never write into them, so a report can be
made while a run is still going. A reporter declares its options as a ``Config`` dataclass (the one
mechanism strategies and evaluators use too: pike_harness.contracts.configurable) and the columns of the
summary table ``pikeh report`` prints (``columns``); the host formats cells by each column's declared
``format`` and knows nothing of a particular reporter's metrics.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pike_harness.contracts.configurable import Configurable, EmptyConfig

FORMATS = ("html", "png", "svg", "csv", "tex")
# How a column's values are written: text as is, int as a whole number, ratio "1.234x", percent "12%",
# usd "$1.23". A missing value (None) is "-".
CELL_FORMATS = ("text", "int", "ratio", "percent", "usd")


@dataclass
class ReportServices:
    """What only the host has, for reporters that need it (a reporter's own options are its ``Config``).

    ``progress`` takes a message (None: the reporter prints to stderr itself). For reporters that
    re-evaluate code: ``resolve_task(ref)`` gives the ``Task``, ``make_evaluator()`` an ``Evaluator``
    built from `pikeh report`'s evaluator options (as `pikeh eval` builds its own), and ``evaluation``
    those options' ``evaluator``, ``device`` and ``protocol`` (for labels). None: not available (a
    report made outside `pikeh report`).
    """

    progress: Callable[[str], None] | None = None
    resolve_task: Callable[[str], Any] | None = None
    make_evaluator: Callable[[], Any] | None = None
    evaluation: dict[str, str] = field(default_factory=dict)


@dataclass
class ReportOptions:
    inputs: list[Path]  # run directories, or folders that contain run directories
    output: Path
    runs: list[str] | None = None  # only these run names
    formats: tuple[str, ...] = FORMATS
    services: ReportServices = field(default_factory=ReportServices)


@dataclass
class ReportSummary:
    """What the CLI prints after a report: where files went and the headline rows."""

    output: Path
    files: list[Path] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per run: name, geomean, ...


@dataclass(frozen=True)
class Column:
    """One column of the summary table ``pikeh report`` prints, declared by the reporter.

    ``key`` is the summary row's field; ``format`` one of ``CELL_FORMATS``; ``text``, when given,
    writes the cell from the whole row instead (for cells that combine fields, like "12/300"), and
    returns None to fall back to ``format``. ``hide_when_empty`` drops the column when no row has a value.
    """

    key: str
    title: str
    format: str = "text"
    text: Callable[[dict[str, Any]], str | None] | None = None
    hide_when_empty: bool = False

    def __post_init__(self) -> None:
        if self.format not in CELL_FORMATS:
            raise ValueError(f"column {self.key!r}: format must be one of {', '.join(CELL_FORMATS)}")

    def cell(self, row: dict[str, Any]) -> str:
        if self.text is not None:
            written = self.text(row)
            if written is not None:
                return written
        return format_value(row.get(self.key), self.format)


def format_value(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "ratio":
        return f"{float(value):.3f}x"
    if kind == "percent":
        return f"{float(value) * 100:.0f}%"
    if kind == "usd":
        return f"${float(value):.2f}"
    if kind == "int":
        return str(int(value))
    return str(value)


def shown_columns(columns: Sequence[Column], rows: Sequence[dict[str, Any]]) -> list[Column]:
    """The declared columns to print for these rows; a reporter that declares none gets one per key."""
    if not columns:
        keys = list(dict.fromkeys(k for row in rows for k in row))
        return [Column(key, key) for key in keys]
    return [c for c in columns if not c.hide_when_empty or any(row.get(c.key) is not None for row in rows)]


class Reporter(Configurable, ABC):
    """Subclass, set ``name``, ``description``, ``Config`` and ``columns``, implement ``report``."""

    name: ClassVar[str] = "reporter"
    kind: ClassVar[str] = "reporter"
    description: ClassVar[str] = ""
    # The reporter's options: each field a `pikeh report` option when this reporter is chosen
    # (pike_harness.contracts.configurable); the instance the host builds arrives as ``self.config``.
    Config: ClassVar[type] = EmptyConfig
    # The summary table's columns (the first is the run's name), and a line explaining them.
    columns: ClassVar[tuple[Column, ...]] = ()
    legend: ClassVar[str] = ""

    @abstractmethod
    def report(self, options: ReportOptions) -> ReportSummary:
        """Write the report under ``options.output`` and return what was written."""
