"""Speed-of-light fractions in the report: how close the reference, torch.compile and the best candidate
come to what the device allows (pike_harness.api.speed_of_light says how a bound is computed).

For every run (and baseline set) timed on a device the peak table knows, each task's reference is
counted once (FLOPs, least bytes; one child process for all tasks), its bound computed, and:

- the table ``speed_of_light`` in report.duckdb (source, task, device, precision, flops, bytes, sol_ms,
  bound, eager/compile/best runtimes and their fractions) and the view ``attempt_sol`` (every correct
  attempt's fraction of SoL);
- a per-task table in the HTML report and the figure ``sol`` (% of SoL, log scale).

Sources timed on a device without peak figures (a CPU, an unknown GPU) get no bound; ``--peaks FILE``
adds devices.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pike_harness.api import speed_of_light

from .metrics import json_object as _json
from .metrics import rows

COLUMNS = {"source": "VARCHAR", "task": "VARCHAR", "name": "VARCHAR", "device_name": "VARCHAR", "device": "VARCHAR",
           "precision": "VARCHAR", "flops": "DOUBLE", "bytes": "DOUBLE", "sol_ms": "DOUBLE", "bound": "VARCHAR",
           "eager_ms": "DOUBLE", "compile_ms": "DOUBLE", "best_ms": "DOUBLE", "eager_fraction": "DOUBLE",
           "compile_fraction": "DOUBLE", "best_fraction": "DOUBLE"}
CAPTION = ("Speed of light: the PyTorch eager reference, torch.compile and the best candidate as a percentage of "
           "the task's speed-of-light time (max of FLOPs / peak rate and least bytes / bandwidth, datasheet peaks "
           "at the precision the tolerance allows); 100% is the roofline. Log scale.")


def device_names(con: Any) -> dict[str, str]:
    """What each run and baseline set was timed on, by name: the GPU's name, else the CPU's model."""
    names: dict[str, str] = {}
    for row in rows(con, "SELECT run, gpu, environment FROM runs"):
        env = _json(row.get("environment"))
        name = row.get("gpu") or env.get("gpu") or env.get("cpu")
        if name:
            names[row["run"]] = str(name)
    for row in rows(con, "SELECT baseline_set, gpu, meta FROM baseline_sets"):
        env = _json(row.get("meta")).get("environment") or {}
        name = row.get("gpu") or env.get("gpu") or env.get("cpu")
        if name:
            names[row["baseline_set"]] = str(name)
    return names


def build(con: Any, resolve_task: Callable[[str], Any] | None, peak_files: Sequence[str],
          say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Fill ``speed_of_light`` and ``attempt_sol`` in report.duckdb; the table's rows (empty when no source
    was timed on a device with peak figures, or the tasks cannot be resolved)."""
    extra = speed_of_light.load_peaks(peak_files)
    peaks = {source: p for source, name in device_names(con).items()
             if (p := speed_of_light.find_peaks(name, extra)) is not None}
    names = device_names(con)
    table: list[dict[str, Any]] = []
    if peaks and resolve_task is not None:
        runtimes = _runtimes(con)
        refs = sorted({task for source, task in runtimes if source in peaks})
        tasks = {}
        for ref in refs:
            try:
                tasks[ref] = resolve_task(ref)
            except Exception as exc:  # a task of a suite this host does not have
                say(f"speed of light: {ref} skipped ({exc})")
        if tasks:
            say(f"speed of light: counting FLOPs and bytes of {len(tasks)} reference(s)")
            bounds = _counts(list(tasks.values()))
            for (source, ref), times in sorted(runtimes.items()):
                if source not in peaks or ref not in bounds:
                    continue
                record = speed_of_light.task_bound(tasks[ref], bounds[ref], peaks[source])
                if record.get("sol_ms") is None:
                    continue
                row = {"source": source, "task": ref, "name": record["name"], "device_name": names[source],
                       "device": record["device"], "precision": record["precision"], "flops": record["flops"],
                       "bytes": record["bytes"], "sol_ms": record["sol_ms"], "bound": record["bound"], **times}
                for side in ("eager", "compile", "best"):
                    row[f"{side}_fraction"] = speed_of_light.fraction(record["sol_ms"], times.get(f"{side}_ms"))
                table.append(row)
    _store(con, table)
    return table


def _counts(tasks: list[Any]) -> dict[str, dict[str, Any]]:
    items = [(t.source, speed_of_light.bound_precision(t.meta.precision, t.meta.precision_rule, t.meta.atol,
                                                       t.meta.rtol)) for t in tasks]
    counts, _ = speed_of_light.count_work(items)
    return {task.ref: count for task, count in zip(tasks, counts, strict=True) if "error" not in count}


def _runtimes(con: Any) -> dict[tuple[str, str], dict[str, float | None]]:
    """(source, task) -> eager, compile and best runtimes (a run's own baselines; a set's best is None)."""
    out: dict[tuple[str, str], dict[str, float | None]] = {}
    for row in rows(con, "SELECT run, task, baseline_ms, best_ms FROM task_final"):
        out[(row["run"], row["task"])] = {"eager_ms": row["baseline_ms"], "compile_ms": None, "best_ms": row["best_ms"]}
    for row in rows(con, "SELECT source, task, mode, runtime_ms FROM baseline_sources "
                         "WHERE category = 'correct' AND mode IN ('eager', 'compile')"):
        entry = out.setdefault((row["source"], row["task"]), {"eager_ms": None, "compile_ms": None, "best_ms": None})
        entry[f"{row['mode']}_ms"] = entry.get(f"{row['mode']}_ms") or row["runtime_ms"]
    return out


def _store(con: Any, table: list[dict[str, Any]]) -> None:
    con.execute("DROP TABLE IF EXISTS speed_of_light")
    con.execute(f"CREATE TABLE speed_of_light ({', '.join(f'{c} {t}' for c, t in COLUMNS.items())})")
    if table:
        con.executemany(f"INSERT INTO speed_of_light VALUES ({', '.join('?' * len(COLUMNS))})",
                        [[row.get(c) for c in COLUMNS] for row in table])
    con.execute("""CREATE OR REPLACE VIEW attempt_sol AS
        SELECT a.run, a.task, a.key, a.idx, a.runtime_ms, s.sol_ms, s.sol_ms / a.runtime_ms AS sol_fraction
        FROM attempts a JOIN speed_of_light s ON s.source = a.run AND s.task = a.task
        WHERE a.category = 'correct' AND a.runtime_ms > 0""")


def figure(table: list[dict[str, Any]]) -> Any:
    """Grouped bars: per task and source, eager / compile / best as % of SoL (log scale)."""
    import altair as alt

    from .figures import tooltips

    long = [{"task": row["task"], "source": row["source"], "what": label, "percent": row[f"{side}_fraction"] * 100}
            for row in table for side, label in (("eager", "reference (eager)"), ("compile", "torch.compile"),
                                                  ("best", "best candidate"))
            if row.get(f"{side}_fraction")]
    return alt.Chart(alt.Data(values=long)).mark_bar().encode(
        x=alt.X("task:N", title="task", sort=None),
        xOffset=alt.XOffset("what:N"),
        y=alt.Y("percent:Q", title="% of speed of light", scale=alt.Scale(type="log")),
        color=alt.Color("what:N", title=None),
        tooltip=tooltips("source:N", "task:N", "what:N", alt.Tooltip("percent:Q", format=".3g")),
    ).facet(row=alt.Row("source:N", title=None)).properties(title="Fraction of speed of light")


def section(table: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The HTML table (a generic report section)."""
    if not table:
        return None

    def pct(value: float | None) -> str:
        return "–" if value is None else f"{value * 100:.3g}%"

    def ms(value: float | None) -> str:
        return "–" if value is None else f"{value:.4g}"

    return {"id": "speed-of-light", "title": "Speed of light",
            "note": "SoL time = max(FLOPs / peak, least bytes / bandwidth) on the device each source was timed on, at "
                    "the precision the task's tolerance allows (dense datasheet peaks; inputs, parameters, buffers "
                    "and outputs moved once). A percentage is SoL time / runtime.",
            "columns": ["source", "task", "device", "precision", "GFLOP", "MB", "SoL ms", "bound", "eager ms",
                        "eager", "compile", "best"],
            "rows": [[r["source"], r["task"], r["device"], r["precision"], f"{r['flops'] / 1e9:.4g}",
                      f"{r['bytes'] / 1e6:.4g}", f"{r['sol_ms']:.4g}", r["bound"], ms(r["eager_ms"]),
                      pct(r["eager_fraction"]), pct(r["compile_fraction"]), pct(r["best_fraction"])] for r in table]}

