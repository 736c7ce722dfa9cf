"""What a task audit found, and how it is shown: records, rich tables, JSON and markdown.

Kept apart from the measuring code (``pike_harness.host.audit``) and free of torch, so a saved JSON audit
from a GPU host can be re-rendered anywhere (``pikeh tasks audit --from-json``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

AUDIT_SCHEMA = 1

# Finding codes: stable names that suite.toml's ``audit_known`` lists refer to.
NEAR_ZERO = "near_zero"
CONSTANT_PASSES = "constant_passes"
INPUT_INSENSITIVE = "input_insensitive"
WEIGHT_INSENSITIVE = "weight_insensitive"
NONFINITE = "nonfinite"
NONDETERMINISTIC = "nondeterministic"
EXPECTATION_MISMATCH = "expectation_mismatch"
FINDING_CODES = (NEAR_ZERO, CONSTANT_PASSES, INPUT_INSENSITIVE, WEIGHT_INSENSITIVE, NONFINITE,
                 NONDETERMINISTIC, EXPECTATION_MISMATCH)

FINDING_HELP = {
    NEAR_ZERO: "every output element is within tolerance of zero, so an all-zero answer passes",
    CONSTANT_PASSES: "every output element is within tolerance of one constant, so that constant passes",
    INPUT_INSENSITIVE: "outputs for two input seeds agree within tolerance: the check cannot tell inputs apart",
    WEIGHT_INSENSITIVE: "outputs for two weight seeds agree within tolerance: the weights barely matter",
    NONFINITE: "the reference output holds NaN or infinity",
    NONDETERMINISTIC: "two runs with the same seeds differ beyond tolerance",
    EXPECTATION_MISMATCH: "shapes or parameter count differ from those recorded in suite.toml",
}


@dataclass
class Finding:
    """One reason not to trust a task's correctness check; ``known`` when the suite records it."""

    code: str
    message: str
    known: bool = False


@dataclass
class TaskCheck:
    """The result of building one task on the meta device (no data, no arithmetic)."""

    ref: str
    name: str
    status: str = "ok"  # "ok", "mismatch" or "error"
    mode: str | None = None  # "meta" or "fake": how the forward pass was traced
    init_args: list[Any] = field(default_factory=list)
    input_shapes: list[list[int]] = field(default_factory=list)
    output_shapes: list[list[int]] = field(default_factory=list)
    output_dtypes: list[str] = field(default_factory=list)
    params: int | None = None
    expected: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


@dataclass
class TaskAudit:
    """What the audit measured for one task, and its verdict ("ok", "flagged" or "error")."""

    ref: str
    name: str
    verdict: str = "ok"
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    atol: float = 1e-2
    rtol: float = 1e-2
    params: int | None = None
    input_shapes: list[list[int]] = field(default_factory=list)
    output_shapes: list[list[int]] = field(default_factory=list)
    output_dtypes: list[str] = field(default_factory=list)
    mean_abs: float | None = None
    max_abs: float | None = None
    zero_pass_fraction: float | None = None  # share of elements an all-zero answer would match
    nonfinite: int | None = None
    input_seed_diff: float | None = None  # max |y(seed 0) - y(seed 1)|
    input_seed_mismatch: float | None = None  # share of elements outside tolerance between them
    weight_seed_diff: float | None = None
    weight_seed_mismatch: float | None = None
    rebuild_diff: float | None = None  # same seeds, model rebuilt: max difference
    repeat_diff: float | None = None  # same model called again: max difference
    runtime_ms: float | None = None  # median eager forward time
    runtime_reps: int = 0
    recorded_eager_ms: float | None = None  # from the suite metadata, for comparison
    peak_memory_mb: float | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def unknown_findings(self) -> list[Finding]:
        return [f for f in self.findings if not f.known]


@dataclass
class AuditEnvironment:
    """Where the audit ran: runtimes depend on all of it."""

    device: str
    device_name: str
    torch_version: str
    cuda_version: str | None
    python_version: str
    host: str
    cpu: str
    cpu_count: int
    tf32_matmul: bool | None = None
    tf32_cudnn: bool | None = None
    driver: str | None = None  # NVIDIA driver version, when nvidia-smi answers
    date: str = ""


@dataclass
class AuditReport:
    """A whole audit: environment, options and one record per task (serialised with a schema)."""

    environment: AuditEnvironment
    suites: list[str]
    options: dict[str, Any]
    tasks: list[TaskAudit]
    schema: int = AUDIT_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return _json_safe(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditReport:
        if data.get("schema") != AUDIT_SCHEMA:
            raise ValueError(f"audit schema {data.get('schema')!r} is not {AUDIT_SCHEMA}")
        numeric = {f.name for f in dataclasses.fields(TaskAudit) if "float" in str(f.type)}
        tasks = []
        for entry in data["tasks"]:
            entry = {key: float(value) if key in numeric and isinstance(value, str) else value
                     for key, value in entry.items()}
            entry["findings"] = [Finding(**f) for f in entry.get("findings", [])]
            tasks.append(TaskAudit(**entry))
        return cls(environment=AuditEnvironment(**data["environment"]), suites=list(data["suites"]),
                   options=dict(data["options"]), tasks=tasks, schema=data["schema"])


# --------------------------------------------------------------------------------------------------
# Rendering


def render_check_table(checks: Sequence[TaskCheck], console: Console) -> None:
    """The fast check as a table: one row per task, problems spelled out."""
    label = _task_labeler([c.ref for c in checks])
    table = Table(title=f"task check{_suite_suffix([c.ref for c in checks])}: meta device, no arithmetic",
                  box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    for column in ("task", "status", "params", "inputs", "output", "ms"):
        table.add_column(column, no_wrap=column not in ("inputs", "output"), overflow="fold",
                         justify="right" if column in ("params", "ms") else "left")
    table.add_column("problems", overflow="fold")
    for c in checks:
        style = {"ok": "green", "mismatch": "red", "error": "red"}[c.status]
        expected = c.expected.get("params")
        params = _count(c.params) + ("" if expected is None else " ✓" if c.params == expected else " ✗")
        dtypes = set(c.output_dtypes)
        output = " ".join(_shape(s) for s in c.output_shapes) + ("" if dtypes <= {"float32"} else f" {'/'.join(sorted(dtypes))}")
        table.add_row(label(c.ref), Text(c.status + (f" ({c.mode})" if c.mode == "fake" else ""), style=style),
                      params, " ".join(_shape(s) for s in c.input_shapes), output, f"{c.seconds * 1000:.0f}",
                      c.error or "; ".join(c.problems))
    console.print(table)
    bad = [c for c in checks if c.status != "ok"]
    total = sum(c.seconds for c in checks)
    console.print(f"{len(checks)} tasks checked in {total:.2f} s: {len(checks) - len(bad)} ok, {len(bad)} failed",
                  highlight=False)


def render_audit_table(report: AuditReport, console: Console) -> None:
    """The audit for a terminal: a row of measurements per task, then each finding and note."""
    env = report.environment
    refs = [t.ref for t in report.tasks]
    label = _task_labeler(refs)
    table = Table(title=f"task audit{_suite_suffix(refs)} on {env.device_name} ({env.device}), "
                        f"torch {env.torch_version}",
                  caption=_legend_line(report), caption_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                  pad_edge=False)
    for column in ("task", "verdict", "params", "output", "mean|y|", "max|y|", "0-pass", "Δin", "Δw", "ms"):
        table.add_column(column, no_wrap=column != "output", overflow="fold", min_width=9 if column == "output" else None,
                         justify="left" if column in ("task", "verdict", "output") else "right")
    for t in report.tasks:
        table.add_row(label(t.ref), _verdict_text(t), _count(t.params), _outputs(t), _num(t.mean_abs),
                      _num(t.max_abs), _pct(t.zero_pass_fraction), _num(t.input_seed_diff),
                      _num(t.weight_seed_diff), _ms(t.runtime_ms))
    console.print(table)
    for t in report.tasks:
        lines = [f"[red]error[/red]: {t.error}"] if t.error else []
        lines += [f"[{'yellow' if f.known else 'red'}]{f.code}[/]{' (known quirk)' if f.known else ''}: {f.message}"
                  for f in t.findings]
        lines += [f"[dim]note[/dim]: {n}" for n in t.notes]
        if lines:
            console.print(f"[bold]{t.ref}[/bold] {t.name}", highlight=False)
            for line in lines:
                console.print(f"  {line}", highlight=False)
    console.print(summary_line(report), highlight=False)


def _task_labeler(refs: Sequence[str]) -> Callable[[str], str]:
    """Bare ids when every task comes from one suite (the title names it), else full references."""
    suites = {ref.rpartition("/")[0] for ref in refs}
    if len(suites) == 1:
        return lambda ref: ref.rpartition("/")[2]
    return lambda ref: ref


def _suite_suffix(refs: Sequence[str]) -> str:
    suites = sorted({ref.rpartition("/")[0] for ref in refs})
    return f" of {suites[0]}" if len(suites) == 1 else ""


def summary_line(report: AuditReport) -> str:
    tasks = report.tasks
    flagged = [t for t in tasks if t.verdict == "flagged"]
    known_only = [t for t in flagged if not t.unknown_findings]
    errors = [t for t in tasks if t.verdict == "error"]
    return (f"{len(tasks)} tasks audited: {sum(t.verdict == 'ok' for t in tasks)} ok, {len(flagged)} flagged "
            f"({len(known_only)} only for known quirks), {len(errors)} errors")


def render_audit_markdown(report: AuditReport, title: str | None = None) -> str:
    """The audit as a markdown report (reports/audit-<suite>.md): environment, table, findings, legend."""
    env = report.environment
    opts = report.options
    timer = "CUDA events" if env.device.startswith("cuda") else "perf_counter"
    lines = [
        f"# {title or 'Task audit: ' + ', '.join(report.suites)}",
        "",
        f"- Date: {env.date}",
        f"- Device: {env.device_name} (`{env.device}`)",
        f"- Software: torch {env.torch_version}" + (f", CUDA {env.cuda_version}" if env.cuda_version else "")
        + (f", driver {env.driver}" if env.driver else "") + f", Python {env.python_version}",
        f"- Host: {env.host}, {env.cpu}, {env.cpu_count} cores",
    ]
    if env.tf32_matmul is not None:
        lines.append(f"- Numerics: fp32; TF32 matmul {'on' if env.tf32_matmul else 'off'}, TF32 cuDNN "
                     f"{'on' if env.tf32_cudnn else 'off'} (PyTorch defaults, as in PIKE)")
    lines += [
        f"- Protocol: inputs seeded {opts.get('input_seed', 0)}, weights seeded {opts.get('weight_seed', 1)} "
        f"(alternatives {opts.get('alt_input_seed', 1)} and {opts.get('alt_weight_seed', 2)}), `model.eval()`, "
        f"`no_grad`; eager ms = median of up to {opts.get('reps')} single forward calls after "
        f"{opts.get('warmup')} warm-ups ({timer}). Rough: not PIKE's `do_bench` protocol.",
        f"- Summary: {summary_line(report)}",
        "",
        "## Tasks",
        "",
    ]
    columns = _markdown_columns(report)
    lines.append("| " + " | ".join(header for header, _, _ in columns) + " |")
    lines.append("|" + "|".join("---:" if right else "---" for _, right, _ in columns) + "|")
    lines += ["| " + " | ".join(cell(t) for _, _, cell in columns) + " |" for t in report.tasks]
    lines += ["", "`*` marks a finding the suite records as a known, published quirk (`audit_known` in suite.toml).",
              "", "## Findings and notes", ""]
    detailed = [t for t in report.tasks if t.findings or t.notes or t.error]
    if not detailed:
        lines.append("None.")
    for t in detailed:
        lines.append(f"### {t.ref} {t.name}")
        lines.append("")
        if t.error:
            lines.append(f"- **error**: {t.error}")
        for f in t.findings:
            lines.append(f"- **{f.code}**{' (known quirk)' if f.known else ''}: {f.message}")
        for note in t.notes:
            lines.append(f"- note: {note}")
        lines.append("")
    lines += ["## Legend", ""]
    lines += [
        "- **zero-pass**: share of output elements an all-zero answer would match under "
        "`allclose(atol, rtol)`.",
        "- **Δ input seed / Δ weight seed**: max |difference| between the outputs for input seeds 0 and 1, "
        "and for weight seeds 1 and 2. Small values next to the tolerance mean the check cannot tell them apart.",
        "- **Δ rerun**: max |difference| between two runs with the same seeds (rebuilt model, and a repeated call).",
        "- **recorded ms**: the eager time recorded in the suite metadata (`eager_ms_h100`: one earlier H100 "
        "run, see suite.toml), for comparison only.",
        "- **peak MB**: peak GPU memory allocated while auditing the task (all runs, three models).",
    ]
    lines += [f"- **{code}**: {text}." for code, text in FINDING_HELP.items()]
    return "\n".join(lines) + "\n"


def _markdown_columns(report: AuditReport) -> list[tuple[str, bool, Callable[[TaskAudit], str]]]:
    """(header, right-aligned, cell) for each column of the markdown table; optional ones when filled."""
    columns: list[tuple[str, bool, Callable[[TaskAudit], str]]] = [
        ("task", False, lambda t: f"{t.ref} {t.name.split('_', 1)[-1]}"),
        ("verdict", False, _markdown_verdict),
        ("params", True, lambda t: _count(t.params)),
        ("output", False, _outputs),
        ("mean abs", True, lambda t: _num(t.mean_abs)),
        ("max abs", True, lambda t: _num(t.max_abs)),
        ("zero-pass", True, lambda t: _pct(t.zero_pass_fraction)),
        ("Δ input seed", True, lambda t: _num(t.input_seed_diff)),
        ("Δ weight seed", True, lambda t: _num(t.weight_seed_diff)),
        ("Δ rerun", True, lambda t: _num(_rerun(t))),
        ("eager ms", True, lambda t: _ms(t.runtime_ms)),
    ]
    if any(t.recorded_eager_ms is not None for t in report.tasks):
        columns.append(("recorded ms", True, lambda t: _ms(t.recorded_eager_ms)))
    if any(t.peak_memory_mb is not None for t in report.tasks):
        columns.append(("peak MB", True, lambda t: "-" if t.peak_memory_mb is None else f"{t.peak_memory_mb:.0f}"))
    return columns


def _markdown_verdict(t: TaskAudit) -> str:
    if t.verdict != "flagged":
        return t.verdict
    return "**flagged**: " + ", ".join(f.code + ("*" if f.known else "") for f in t.findings)


def _legend_line(report: AuditReport) -> str:
    return ("0-pass: share of output elements an all-zero answer matches; Δin / Δw: max |diff| between "
            "outputs for input seeds 0/1 and weight seeds 1/2; ms: median eager forward; "
            "flagged*: only findings recorded as known quirks")


def _verdict_text(t: TaskAudit) -> Text:
    if t.verdict == "error":
        return Text("error", style="red")
    if t.verdict == "ok":
        return Text("ok", style="green")
    if t.unknown_findings:
        return Text("flagged", style="red")
    return Text("flagged*", style="yellow")


def _rerun(t: TaskAudit) -> float | None:
    values = [v for v in (t.rebuild_diff, t.repeat_diff) if v is not None]
    return max(values) if values else None


def _outputs(t: TaskAudit) -> str:
    if not t.output_shapes:
        return "-"
    dtypes = {d for d in t.output_dtypes}
    shapes = " ".join(_shape(s) for s in t.output_shapes)
    return shapes if dtypes == {"float32"} else f"{shapes} {'/'.join(sorted(dtypes))}"


def _shape(shape: Sequence[int]) -> str:
    return "(" + ",".join(str(d) for d in shape) + ")"


def _count(n: int | None) -> str:
    if n is None:
        return "-"
    if n >= 1_000_000:
        return f"{n / 1e6:.2f}M"
    if n >= 1_000:
        return f"{n / 1e3:.1f}K"
    return str(n)


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    return f"{x:.2g}" if 1e-2 <= abs(x) < 1e3 else f"{x:.0e}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def _json_safe(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as strings a reader can recognise."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value
