"""Every metric of the report, as DuckDB SQL over the tables ``pike_harness.host.store_db`` loads.

Why SQL: one definition per metric, readable in one place, that users can rerun on ``report.duckdb``
(``duckdb report.duckdb "FROM score_vs_queries"``). Python only builds the grids and parameters; the
views below compute speedups, geomeans, curves, fast_p, outcome counts and EFA repairs.

Definitions (specs/reporting.md; docs/report.md restates them for users):

- A run's *budget* B is ``--budget`` when given, else the run's ``query_budget``. Only counted attempts
  (``idx`` 1..B) compete; brainstorming and other uncounted queries (``idx`` NULL) never do, and the
  overshoot a strategy may take past B is cut off.
- *Eager baseline* of a task: the run's own ``baseline`` event with mode ``eager`` (the latest one when
  there are several) whose category is ``correct``. Tasks without one are left out of every suite
  number: a speedup needs a baseline timed on the same host in the same sitting.
- *Contending attempt*: a correct attempt within the budget whose code does not contain
  ``torch.jit.trace`` (PIKE's analysis ignores those; ``include_jit_trace`` lets them contend). Only
  contending attempts make a task's best, at every budget.
- *Speedup at budget b*: baseline / fastest contending runtime among attempts with ``idx <= b``.
  ``speedup_raw`` is that ratio (NULL when nothing is correct); ``speedup`` is PIKE's clamped value
  ``max(1, raw)``, 1.0 when nothing is correct (the user can always keep the original).
- *Final speedup* of a task (``task_final``): the paired speedup of its final best (``final_timings``:
  re-timed against its eager reference in alternating blocks, by the run or `pikeh report --retime`,
  for the same code hash) with its 95% interval where there is one, labelled ``re-timed``; else the
  search-time ratio above, labelled ``search-time``. The headline score (``run_summary.score``) is the
  suite score of final speedups; the curves stay search-time (``search_score`` is their end point).
- *Suite score*: ``exp(avg(ln(speedup)))`` over the run's tasks with a baseline. ``score_raw`` uses raw
  speedups, counting a task with no correct attempt as 1.0, so the two differ only by the clamp.
- *Spend*: each LLM call costs its tokens at the price table (``model_prices``, or the recorded
  ``cost_usd`` when the table has no price or the service reported the cost). What a task or run spent
  (``task_costs.spend_usd``, ``task_final.spend_usd``, ``run_costs.spend_usd``, ``run_summary.usd_per_task``)
  is the sum over every journaled call, whatever its index: the overshoot past B was sent and paid, and
  ``pikeh run``'s own table counts it. ``spend_in_budget_usd`` is the part within B.
- *Money budget*: the money curve counts only calls within B (``call_costs.in_budget``, ``task_spend``). A
  task's spend accumulates in query order (uncounted calls such as brainstorming first, then by
  ``idx``); an attempt is within a money budget d when the spend up to and including its query is <= d.
- *Abandoned queries* (``llm_abandoned``, ``task_abandoned``, ``run_abandoned``): queries unanswered when a
  run stopped, perhaps billed. Their recorded estimate (prompt only, a lower bound) is shown apart, never
  added to the spend, never counted as a query or an attempt, never on a curve.
- *fast_p*: fraction of tasks with a baseline whose best attempt (at budget B) is correct with raw
  speedup > p.
- *Outlier baseline*: a run's eager baseline more than ``outlier_factor`` (5; 0: off) times the fastest eager
  baseline of the same task by another seed of its configuration (same ``config_key``) on the same
  hardware. Noise only ever slows a timing (another tenant, a cold cache, a clock drop), so the fastest
  seed is the reference, and a factor of 5 lies far outside the seed-to-seed spread of an undisturbed
  timing. The task then has no baseline in that run (left out of every score and the headline, listed
  in ``baseline_outliers``) until its final best is re-timed paired (by the run, or ``--retime``): the
  paired speedup needs no baseline of the run, so the task then counts again.
- *Mismatched timing*: a correct attempt whose evaluation ran on other hardware (GPU name, else CPU
  model) than its task's eager baseline. It still counts (the data is what it is), but the report
  warns and ``timing_mismatch`` lists them: re-time on one machine (``--retime``) before trusting them.
- *EFA repair*: a lineage starts at an attempt whose role is not ``fix`` and follows ``fix`` attempts
  through their ``parent`` key. A failed lineage is one whose first attempt's category is an error or
  ``incorrect``/``rejected`` (not ``correct``, not ``llm_error``); it is repaired when some fix attempt
  in it, within budget, is ``correct``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

OUTCOME_CATEGORIES = ("compile_error", "runtime_error", "timeout", "incorrect", "rejected", "correct", "llm_error")



OUTLIER_FACTOR = 5.0  # default: an eager baseline this many times its seed group's fastest is set aside (above)


@dataclass
class MetricParams:
    """What the user can change about the metrics (``pikeh report`` options)."""

    budget: int | None = None  # None: each run's own query_budget
    money_step: float = 0.20  # $ per task between points of the money curve
    money_max: float = 25.0  # $ per task at the right end of the money curve
    money_budget: float | None = None  # the marker on the bar chart; None: the run's, else money_max
    p_step: float = 0.05  # resolution of the fast_p curve
    outlier_factor: float = OUTLIER_FACTOR  # 0: every baseline counts, as in PIKE's scoring
    include_jit_trace: bool = False  # PIKE's rule by default: torch.jit.trace code never makes the best


VIEWS: list[tuple[str, str]] = [
    # -- scope ------------------------------------------------------------------------------------
    ("report_runs", """
        SELECT r.*,
               coalesce(p.budget, r.query_budget, m.max_idx, 0) AS budget,
               least(coalesce(p.budget, r.query_budget, m.max_idx, 0), coalesce(m.max_idx, 0)) AS queries_done,
               -- queries a strategy issued past the budget (its overshoot): shown, never scored
               greatest(0, coalesce(m.max_idx, 0) - coalesce(p.budget, r.query_budget, m.max_idx, 0)) AS past_budget,
               coalesce(p.money_budget, r.money_budget, p.money_max) AS money_marker
        FROM runs r
        CROSS JOIN params p
        LEFT JOIN (SELECT run, max(idx) AS max_idx FROM attempts GROUP BY run) m USING (run)
    """),
    ("eager_baselines", """
        SELECT b.run, b.task, r.config_key, arg_max(b.runtime_ms, b.time) AS baseline_ms,
               arg_max(b.hardware, b.time) AS baseline_hardware
        FROM baselines b JOIN runs r USING (run)
        WHERE b.run IS NOT NULL AND b.mode = 'eager' AND b.category = 'correct' AND b.runtime_ms > 0
        GROUP BY b.run, b.task, r.config_key
    """),
    # Eager baselines slower than params.outlier_factor x the fastest timing of the same task by another
    # seed of the same configuration on the same hardware: a disturbed timing, kept out of every score.
    ("baseline_outliers", """
        SELECT e.run, e.task, e.baseline_ms, min(x.baseline_ms) AS group_ms,
               e.baseline_ms / min(x.baseline_ms) AS ratio, arg_min(x.run, x.baseline_ms) AS group_run,
               p.outlier_factor AS factor
        FROM eager_baselines e
        JOIN eager_baselines x ON x.config_key = e.config_key AND x.task = e.task AND x.run <> e.run
             AND x.baseline_hardware IS NOT DISTINCT FROM e.baseline_hardware
        CROSS JOIN params p
        WHERE p.outlier_factor > 0
        GROUP BY e.run, e.task, e.baseline_ms, p.outlier_factor
        HAVING e.baseline_ms > p.outlier_factor * min(x.baseline_ms)
    """),
    ("task_baselines", """
        SELECT e.run, e.task, e.baseline_ms, e.baseline_hardware
        FROM eager_baselines e ANTI JOIN baseline_outliers o USING (run, task)
    """),
    ("report_tasks", """
        SELECT t.run, t.task, t.suite, t.task_id, t.name, b.baseline_ms
        FROM tasks t JOIN report_runs USING (run) LEFT JOIN task_baselines b USING (run, task)
    """),
    # Counted attempts within the budget: the only ones that compete for a speedup.
    # ``contends``: correct, and allowed to be the best (PIKE's torch.jit.trace rule, params.include_jit_trace).
    ("budget_attempts", """
        SELECT a.*, (a.category = 'correct' AND a.runtime_ms > 0
                     AND (p.include_jit_trace OR NOT coalesce(a.jit_trace, false))) AS contends
        FROM attempts a JOIN report_runs r USING (run) CROSS JOIN params p
        WHERE a.idx IS NOT NULL AND a.idx BETWEEN 1 AND r.budget
    """),
    # Every attempt within the budget, uncounted ones included: what outcome counts describe.
    ("scoped_attempts", """
        SELECT a.* FROM attempts a JOIN report_runs r USING (run)
        WHERE a.idx IS NULL OR a.idx <= r.budget
    """),
    # Correct attempts timed on other hardware than their task's baseline (a run resumed on another GPU
    # model, a cluster of mixed nodes): their speedups compare two machines.
    ("timing_mismatch", """
        SELECT a.run, a.task, a.key, a.idx, a.runtime_ms, a.hardware, b.baseline_hardware, b.baseline_ms
        FROM scoped_attempts a JOIN task_baselines b USING (run, task)
        WHERE a.category = 'correct' AND a.hardware IS NOT NULL AND b.baseline_hardware IS NOT NULL
          AND a.hardware <> b.baseline_hardware
    """),
    # -- speedup vs queries -----------------------------------------------------------------------
    # Curves number attempts as PIKE's analysis does (curve_idx: each sample's fixes follow it).
    ("best_so_far", """
        SELECT run, task, idx,
               min(best_here) OVER (PARTITION BY run, task ORDER BY idx
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS best_ms
        FROM (SELECT run, task, coalesce(curve_idx, idx) AS idx,
                     min(runtime_ms) FILTER (contends) AS best_here
              FROM budget_attempts GROUP BY run, task, coalesce(curve_idx, idx))
    """),
    ("query_grid", """
        SELECT t.run, t.task, t.baseline_ms, g.b
        FROM report_tasks t JOIN report_runs r USING (run),
             LATERAL (SELECT range AS b FROM range(1, r.queries_done + 1)) g
    """),
    ("task_speedup_at_query", """
        SELECT g.run, g.task, g.b, g.baseline_ms, s.best_ms,
               g.baseline_ms / s.best_ms AS speedup_raw,
               greatest(1.0, coalesce(g.baseline_ms / s.best_ms, 1.0)) AS speedup
        FROM query_grid g
        ASOF LEFT JOIN best_so_far s ON g.run = s.run AND g.task = s.task AND g.b >= s.idx
    """),
    ("score_vs_queries", """
        SELECT run, b AS queries,
               exp(avg(ln(speedup))) AS score,
               exp(avg(ln(coalesce(speedup_raw, 1.0)))) AS score_raw,
               count(*) AS n_tasks, count(speedup_raw) AS n_solved
        FROM task_speedup_at_query WHERE baseline_ms IS NOT NULL
        GROUP BY run, b
    """),
    # -- money ------------------------------------------------------------------------------------
    # Every journaled call, whatever its index: a query past the budget (a round's overshoot) was sent
    # and paid. ``in_budget``: uncounted, or counted within the budget; only those make the money curve.
    ("call_costs", """
        SELECT c.run, c.task, c.key, c.idx, c.time, c.ok,
               (c.idx IS NULL OR c.idx <= r.budget) AS in_budget,
               CASE
                 WHEN NOT coalesce(c.ok, false) THEN 0.0
                 WHEN p.price_key IS NOT NULL AND c.prompt_tokens IS NOT NULL AND c.output_tokens IS NOT NULL
                      AND (p.forced OR c.cost_source IS DISTINCT FROM 'reported') THEN
                   ((c.prompt_tokens - least(greatest(coalesce(c.cached_tokens, 0), 0), c.prompt_tokens))
                        * CASE WHEN p.long_above IS NOT NULL AND c.prompt_tokens > p.long_above
                               THEN p.long_input ELSE p.input END
                    + least(greatest(coalesce(c.cached_tokens, 0), 0), c.prompt_tokens)
                        * CASE WHEN p.long_above IS NOT NULL AND c.prompt_tokens > p.long_above
                               THEN coalesce(p.long_cached_input, p.long_input)
                               ELSE coalesce(p.cached_input, p.input) END
                    + c.output_tokens
                        * CASE WHEN p.long_above IS NOT NULL AND c.prompt_tokens > p.long_above
                               THEN p.long_output ELSE p.output END) / 1e6
                 ELSE c.cost_usd
               END AS cost
        FROM llm_calls c JOIN report_runs r USING (run)
        LEFT JOIN model_prices p
               ON p.forced OR (p.provider IS NOT DISTINCT FROM c.provider AND p.model IS NOT DISTINCT FROM c.model)
    """),
    # The money curve's spend: the calls within the budget, accumulated in query order.
    ("task_spend", """
        SELECT run, task, key, idx, cost,
               sum(coalesce(cost, 0)) OVER w AS cum_cost,
               bool_and(cost IS NOT NULL) OVER w AS cost_known
        FROM call_costs WHERE in_budget
        WINDOW w AS (PARTITION BY run, task ORDER BY idx NULLS FIRST, time, key
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
    """),
    ("best_by_spend", """
        SELECT run, task, cum_cost, min(best_ms) AS best_ms
        FROM (SELECT a.run, a.task, s.cum_cost,
                     min(CASE WHEN a.contends THEN a.runtime_ms END)
                         OVER (PARTITION BY a.run, a.task ORDER BY s.cum_cost, a.idx
                               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS best_ms
              FROM budget_attempts a JOIN task_spend s USING (run, task, key))
        GROUP BY run, task, cum_cost
    """),
    # What was paid: every call of a task (spend_usd, the run's own end table's "spend"), and the part
    # within the budget (spend_in_budget_usd, what the money curve draws).
    ("task_costs", """
        SELECT run, task, count(*) AS calls, count(*) FILTER (NOT in_budget) AS calls_past_budget,
               sum(coalesce(cost, 0)) AS spend_usd,
               coalesce(sum(coalesce(cost, 0)) FILTER (in_budget), 0) AS spend_in_budget_usd,
               bool_and(cost IS NOT NULL) AS cost_known
        FROM call_costs GROUP BY run, task
    """),
    ("run_costs", """
        SELECT r.run, count(c.key) AS calls, count(c.key) FILTER (c.cost IS NULL) AS unknown_cost_calls,
               sum(c.cost) AS spend_usd,
               count(c.key) FILTER (NOT c.in_budget) AS calls_past_budget,
               sum(c.cost) FILTER (c.in_budget) AS spend_in_budget_usd
        FROM report_runs r LEFT JOIN call_costs c USING (run) GROUP BY r.run
    """),
    # Queries abandoned at a stop (``llm_abandoned``): perhaps billed, never answered. Their estimated
    # cost is a floor (prompt only) and stays apart from every figure above: never in the spend, never a
    # query or an attempt, never on a curve. ``abandoned_usd_estimated`` sums the known estimates (NULL
    # when none is known); ``abandoned_cost_unknown`` counts those without one (an unpriced model).
    ("task_abandoned", """
        SELECT run, task, count(*) AS abandoned_queries, sum(estimated_cost_usd) AS abandoned_usd_estimated,
               count(*) FILTER (estimated_cost_usd IS NULL) AS abandoned_cost_unknown
        FROM llm_abandoned GROUP BY run, task
    """),
    ("run_abandoned", """
        SELECT r.run, count(a.run) AS abandoned_queries, sum(a.estimated_cost_usd) AS abandoned_usd_estimated,
               count(a.run) FILTER (a.estimated_cost_usd IS NULL) AS abandoned_cost_unknown
        FROM report_runs r LEFT JOIN llm_abandoned a USING (run) GROUP BY r.run
    """),
    # Money points: the curve's grid plus each run's marker budget, evaluated by one join.
    # The curve stops at the first point at or past the run's largest per-task spend within the budget:
    # beyond it the curve is flat by definition, and drawing it to $25 would suggest money the run never
    # spent.
    ("money_points", """
        SELECT r.run, round(k * p.money_step, 6) AS usd, false AS marker
        FROM report_runs r CROSS JOIN params p
        LEFT JOIN (SELECT run, max(cum_cost) AS top FROM task_spend GROUP BY run) s USING (run),
             LATERAL (SELECT range AS k FROM range(1, CAST(ceil(least(p.money_max, greatest(s.top, p.money_step))
                                                               / p.money_step - 1e-9) AS BIGINT) + 1))
        UNION ALL
        SELECT run, money_marker, true FROM report_runs
    """),
    ("task_speedup_at_money", """
        SELECT g.run, g.usd, g.marker, g.task, g.baseline_ms, s.best_ms,
               g.baseline_ms / s.best_ms AS speedup_raw,
               greatest(1.0, coalesce(g.baseline_ms / s.best_ms, 1.0)) AS speedup
        FROM (SELECT m.run, m.usd, m.marker, t.task, t.baseline_ms
              FROM money_points m JOIN report_tasks t USING (run)) g
        ASOF LEFT JOIN best_by_spend s ON g.run = s.run AND g.task = s.task AND g.usd + 1e-9 >= s.cum_cost
    """),
    ("score_vs_money_all", """
        SELECT s.run, s.usd, s.marker, exp(avg(ln(s.speedup))) AS score,
               exp(avg(ln(coalesce(s.speedup_raw, 1.0)))) AS score_raw, count(*) AS n_tasks,
               count(s.speedup_raw) AS n_solved, c.unknown_cost_calls = 0 AS cost_known
        FROM task_speedup_at_money s JOIN run_costs c USING (run)
        WHERE s.baseline_ms IS NOT NULL
        GROUP BY s.run, s.usd, s.marker, c.unknown_cost_calls
    """),
    ("score_vs_money", """
        SELECT run, usd, score, score_raw, n_tasks, n_solved, cost_known FROM score_vs_money_all WHERE NOT marker
    """),
    # -- per-task breakdown at the full budget ----------------------------------------------------
    # The final best: host/final_best.py states the same rule for the run (fastest, then earliest).
    ("task_best", """
        SELECT run, task, key AS best_key, idx AS best_idx, runtime_ms AS best_ms, dir AS best_dir,
               code_sha256 AS best_sha256, coalesce(noisy_timing, false) AS best_noisy
        FROM budget_attempts WHERE contends
        QUALIFY row_number() OVER (PARTITION BY run, task ORDER BY runtime_ms, idx) = 1
    """),
    # The paired re-timing of each task's final best (same code hash): one with a speedup before one
    # without, then the newest (a report's --retime after the run's own).
    ("final_paired", """
        SELECT b.run, b.task, f.speedup AS paired_speedup, f.ci_low, f.ci_high, f.n_pairs, f.effective_pairs, f.stop AS paired_stop,
               f.flagged AS paired_flagged, f.why AS paired_why, f.source AS paired_source,
               f.seconds AS paired_seconds
        FROM task_best b
        JOIN final_timings f ON f.run = b.run AND f.task = b.task AND f.code_sha256 = b.best_sha256
        QUALIFY row_number() OVER (PARTITION BY b.run, b.task
                                   ORDER BY f.speedup IS NOT NULL DESC, f.time DESC NULLS LAST) = 1
    """),
    # A task scores with a baseline, or with a paired speedup (which needs none of the run's baselines:
    # an outlier baseline set aside stops mattering once the task is re-timed).
    ("task_final", """
        SELECT t.run, t.task, t.suite, t.task_id, t.name, t.baseline_ms, b.best_ms, b.best_key, b.best_idx,
               b.best_dir, b.best_sha256,
               coalesce(fp.paired_speedup, t.baseline_ms / b.best_ms) AS speedup_raw,
               CASE WHEN t.baseline_ms IS NOT NULL OR fp.paired_speedup IS NOT NULL
                    THEN greatest(1.0, coalesce(fp.paired_speedup, t.baseline_ms / b.best_ms, 1.0)) END AS speedup,
               t.baseline_ms / b.best_ms AS search_speedup_raw,
               CASE WHEN fp.paired_speedup IS NOT NULL THEN 're-timed'
                    WHEN b.best_ms IS NOT NULL THEN 'search-time' END AS timing,
               fp.ci_low, fp.ci_high, fp.n_pairs, fp.effective_pairs, fp.paired_stop, fp.paired_flagged, fp.paired_why, fp.paired_source,
               b.best_noisy,
               coalesce(c.n_attempts, 0) AS n_attempts, coalesce(c.n_correct, 0) AS n_correct,
               coalesce(c.queries, 0) AS queries, s.spend_usd, s.spend_in_budget_usd, s.cost_known
        FROM report_tasks t
        LEFT JOIN task_best b USING (run, task)
        LEFT JOIN final_paired fp USING (run, task)
        LEFT JOIN (SELECT run, task, count(*) AS n_attempts, count(*) FILTER (category = 'correct') AS n_correct,
                          max(idx) AS queries
                   FROM budget_attempts GROUP BY run, task) c USING (run, task)
        LEFT JOIN task_costs s USING (run, task)
    """),
    # Every attempt with its speedup and the best so far: the per-task trajectory of the HTML report.
    ("attempt_detail", """
        SELECT a.run, a.task, a.idx, a.key, a.role, a.parent, a.category, a.runtime_ms, a.reason, a.check_name,
               a.dir, CASE WHEN a.category = 'correct' AND a.runtime_ms > 0 THEN b.baseline_ms / a.runtime_ms END
                   AS speedup,
               b.baseline_ms / s.best_ms AS best_speedup
        FROM scoped_attempts a
        LEFT JOIN task_baselines b USING (run, task)
        LEFT JOIN best_so_far s USING (run, task, idx)
    """),
    # -- fast_p -----------------------------------------------------------------------------------
    # fast_p only changes at the tasks' speedups, so those points are exact; between them a regular grid
    # (p_step, coarsened to at most 400 points when speedups are large) keeps the curve readable.
    ("p_grid", """
        WITH top AS (SELECT greatest(2.0, coalesce(max(speedup_raw), 0) * 1.05) AS pmax FROM task_final),
             step AS (SELECT greatest(p.p_step, top.pmax / 400) AS width, top.pmax FROM params p, top)
        SELECT DISTINCT p FROM (
            SELECT round(k * step.width, 6) AS p
            FROM step, LATERAL (SELECT range AS k FROM range(0, CAST(ceil(step.pmax / step.width) AS BIGINT) + 1))
            UNION ALL SELECT 1.0
            UNION ALL SELECT round(speedup_raw, 6) FROM task_final WHERE speedup_raw IS NOT NULL)
    """),
    ("fast_p", """
        SELECT f.run, g.p, avg(CASE WHEN f.speedup_raw > g.p THEN 1.0 ELSE 0.0 END) AS fast_p,
               count(*) AS n_tasks
        FROM task_final f CROSS JOIN p_grid g
        WHERE f.speedup IS NOT NULL
        GROUP BY f.run, g.p
    """),
    # -- outcomes and the error-fixing agent ------------------------------------------------------
    ("outcomes", """
        SELECT run, coalesce(role, '?') AS role, category, count(*) AS n
        FROM scoped_attempts GROUP BY ALL
    """),
    ("lineages", """
        WITH RECURSIVE walk(run, task, root, root_category, key, role, category, idx, depth) AS (
            SELECT run, task, key, category, key, role, category, idx, 0
            FROM scoped_attempts WHERE role IS DISTINCT FROM 'fix'
            UNION ALL
            SELECT w.run, w.task, w.root, w.root_category, a.key, a.role, a.category, a.idx, w.depth + 1
            FROM walk w JOIN scoped_attempts a
              ON a.run = w.run AND a.task = w.task AND a.parent = w.key AND a.role = 'fix'
        )
        SELECT * FROM walk
    """),
    ("efa_by_category", """
        SELECT run, root_category,
               count(DISTINCT (task, root)) AS failed,
               count(DISTINCT (task, root)) FILTER (role = 'fix' AND category = 'correct') AS repaired,
               count(*) FILTER (role = 'fix') AS fix_attempts
        FROM lineages
        WHERE root_category NOT IN ('correct', 'llm_error')
        GROUP BY run, root_category
    """),
    ("efa", """
        SELECT r.run, coalesce(sum(e.failed), 0) AS failed, coalesce(sum(e.repaired), 0) AS repaired,
               coalesce(f.fix_attempts, 0) AS fix_attempts, coalesce(f.fix_correct, 0) AS fix_correct
        FROM report_runs r
        LEFT JOIN efa_by_category e USING (run)
        LEFT JOIN (SELECT run, count(*) AS fix_attempts, count(*) FILTER (category = 'correct') AS fix_correct
                   FROM scoped_attempts WHERE role = 'fix' GROUP BY run) f USING (run)
        GROUP BY r.run, f.fix_attempts, f.fix_correct
    """),
    # -- reference lines: other baseline modes and imported solution sets -------------------------
    ("baseline_sources", """
        SELECT coalesce(run, baseline_set) AS source, run IS NULL AS is_set, task, mode,
               arg_max(runtime_ms, time) AS runtime_ms, arg_max(category, time) AS category
        FROM baselines GROUP BY ALL
    """),
    ("reference_tasks", """
        SELECT s.source, s.mode, s.task, e.runtime_ms AS eager_ms,
               CASE WHEN s.category = 'correct' AND s.runtime_ms > 0 THEN e.runtime_ms / s.runtime_ms END AS speedup_raw
        FROM baseline_sources s
        JOIN baseline_sources e ON e.source = s.source AND e.task = s.task AND e.mode = 'eager'
             AND e.category = 'correct' AND e.runtime_ms > 0
        WHERE s.mode <> 'eager'
          AND (NOT s.is_set OR NOT EXISTS (SELECT 1 FROM report_tasks)
               OR s.task IN (SELECT task FROM report_tasks))
    """),
    ("reference_scores", """
        SELECT source, mode, source || ' ' || mode AS label,
               exp(avg(ln(greatest(1.0, coalesce(speedup_raw, 1.0))))) AS score,
               exp(avg(ln(coalesce(speedup_raw, 1.0)))) AS score_raw,
               count(*) AS n_tasks, count(speedup_raw) AS n_correct
        FROM reference_tasks GROUP BY source, mode
    """),
    # -- seeds of one configuration ---------------------------------------------------------------
    ("run_scores", """
        SELECT r.run, r.config_key, s.score, s.score_raw, s.n_tasks, s.n_solved
        FROM report_runs r LEFT JOIN score_vs_queries s ON s.run = r.run AND s.queries = r.queries_done
    """),
    # Configurations (seeds grouped by config_key) and their bootstrap intervals are tables that
    # seed_stats.py writes: config_scores, config_score_vs_queries, config_score_vs_money, config_comparison.
    # -- one row per run: what the terminal table and the HTML header show ------------------------
    ("run_summary", """
        SELECT r.run, r.strategy, r.llm, r.status, r.seed, r.config_key, r.gpu, r.budget, r.queries_done,
               r.past_budget,
               (SELECT count(*) FROM report_tasks t WHERE t.run = r.run) AS n_tasks,
               fs.n_tasks AS n_with_baseline, fs.score, fs.score_raw, s.n_solved,
               -- the curve's end (every task at its search-time number), where some task was re-timed
               CASE WHEN fs.n_retimed IS NOT NULL THEN s.score END AS search_score,
               fs.n_retimed, fs.n_flagged_retimes,
               -- search-time timings flagged noisy among the attempts in scope
               (SELECT count(*) FROM scoped_attempts a WHERE a.run = r.run AND a.noisy_timing) AS noisy_attempts,
               -- results flagged noisy, re-timed and search-time together; NULL when none (the column hides)
               nullif(coalesce(fs.n_flagged_retimes, 0)
                      + (SELECT count(*) FROM scoped_attempts a WHERE a.run = r.run AND a.noisy_timing), 0) AS n_noisy,
               -- no money score where some calls have no known price: it would be computed from a part
               CASE WHEN coalesce(c.unknown_cost_calls, 0) = 0 THEN m.score END AS money_score, r.money_marker,
               (SELECT avg(CASE WHEN f.speedup_raw > 1.0 THEN 1.0 ELSE 0.0 END) FROM task_final f
                WHERE f.run = r.run AND f.speedup IS NOT NULL) AS fast_1,
               c.spend_usd / nullif((SELECT count(*) FROM report_tasks t WHERE t.run = r.run), 0) AS usd_per_task,
               c.unknown_cost_calls,
               (SELECT count(*) FROM scoped_attempts a WHERE a.run = r.run) AS attempts,
               (SELECT count(*) FROM scoped_attempts a WHERE a.run = r.run AND a.category = 'correct') AS correct,
               e.failed AS efa_failed, e.repaired AS efa_repaired,
               (SELECT count(*) FROM timing_mismatch x WHERE x.run = r.run) AS mismatched_timings,
               -- queries abandoned at a stop, apart from the spend (NULL when none: the column hides; not
               -- in summary.csv): the run's total estimated floor and how many have no estimate
               nullif(ab.abandoned_queries, 0) AS abandoned_queries, ab.abandoned_usd_estimated,
               nullif(ab.abandoned_cost_unknown, 0) AS abandoned_cost_unknown
        FROM report_runs r
        LEFT JOIN run_scores s USING (run)
        LEFT JOIN (SELECT run, count(*) AS n_tasks, exp(avg(ln(speedup))) AS score,
                          exp(avg(ln(coalesce(speedup_raw, 1.0)))) AS score_raw,
                          nullif(count(*) FILTER (timing = 're-timed'), 0) AS n_retimed,
                          count(paired_flagged) FILTER (timing = 're-timed') AS n_flagged_retimes
                   FROM task_final WHERE speedup IS NOT NULL GROUP BY run) fs USING (run)
        LEFT JOIN score_vs_money_all m ON m.run = r.run AND m.marker
        LEFT JOIN run_costs c USING (run)
        LEFT JOIN efa e USING (run)
        LEFT JOIN run_abandoned ab USING (run)
        ORDER BY r.run
    """),
]

PRICES_DDL = """
CREATE OR REPLACE TABLE model_prices (
    provider VARCHAR, model VARCHAR, forced BOOLEAN, price_key VARCHAR,
    input DOUBLE, output DOUBLE, cached_input DOUBLE,
    long_above BIGINT, long_input DOUBLE, long_output DOUBLE, long_cached_input DOUBLE
)
"""


def create_metrics(con: Any, params: MetricParams, prices: Sequence[dict[str, Any]] = ()) -> None:
    """Create the parameter, price and helper tables, then every metric view, in connection ``con``.

    The tables from ``store_db.materialize`` must already be there. Views (not tables) so the saved
    ``report.duckdb`` recomputes from its tables and a reader can change ``params`` and query again.
    """
    con.execute("CREATE OR REPLACE TABLE params (budget INTEGER, money_step DOUBLE, money_max DOUBLE, "
                "money_budget DOUBLE, p_step DOUBLE, outlier_factor DOUBLE, include_jit_trace BOOLEAN)")
    con.execute("INSERT INTO params VALUES (?, ?, ?, ?, ?, ?, ?)",
                [params.budget, params.money_step, params.money_max, params.money_budget, params.p_step,
                 params.outlier_factor, params.include_jit_trace])
    con.execute(PRICES_DDL)
    columns = ("provider", "model", "forced", "price_key", "input", "output", "cached_input", "long_above",
               "long_input", "long_output", "long_cached_input")
    if prices:
        con.executemany(f"INSERT INTO model_prices VALUES ({', '.join('?' * len(columns))})",
                        [[row.get(c) for c in columns] for row in prices])
    for name, sql in VIEWS:
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")


def materialize_views(con: Any) -> None:
    """Compute every metric view once, into a temporary table of the same name, for this connection.

    The views are chained (``run_summary`` reads ``task_final``, which reads ``task_best``, ...), and
    DuckDB inlines a view into each query that reads it, so the ~30 queries of one report would each
    run the whole chain again. A temporary table shadows the view of the same name for the rest of this
    connection (unqualified names look in ``temp`` first), and the views are materialised in their
    order, so each one reads the tables of those before it. Temporary tables are never saved: the
    ``report.duckdb`` a reader opens keeps the views. Call it after the last write the views depend on
    (the re-timings).
    """
    for name, _ in VIEWS:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS FROM main.{name}")


def json_object(value: Any) -> dict[str, Any]:
    """A JSON column's object (DuckDB returns JSON as text), {} for NULL or anything else."""
    if isinstance(value, dict):
        return value
    try:
        loaded = json.loads(value) if value else {}
    except (TypeError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def rows(con: Any, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """A query's result as dicts (no pandas needed)."""
    cursor = con.execute(sql, list(params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
