"""Whole `pikeh run --strategy pike-o` runs: the real openai SDK talks to a loopback fake model, the
scripted fake evaluator (tests/run/scripted_programs.py) judges its tagged programs by their declared
work (the search is what these test; real evaluation is tests/eval's), and the assertions read what
the model was asked (the requests) against what the journal kept.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pike_o_model import FakeCoder, serial_of, tag_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "run"))
from pikeh_pike_o import PikeOConfig  # noqa: E402
from pikeh_pike_o.prompts import crossover_sections, format_fitness, is_crossover  # noqa: E402
from scripted_programs import scripted_evaluator_plugin  # noqa: E402

from pike_harness.host.store import read_journal  # noqa: E402
from pike_harness.kit import code_fences, prompt_kinds, prompt_templates  # noqa: E402
from pike_harness.testing import invoke  # noqa: E402
from pike_harness.testing.llm_server import FakeLLMServer  # noqa: E402

SCRIPTED_PIKEH = str(Path(__file__).resolve().parents[1] / "run" / "scripted_pikeh.py")

KEY_ENV = {"OPENAI_API_KEY": "sk-test-pike-o-0123456789"}


def run_args(server: FakeLLMServer, out: Path, *extra: str, budget: int, name: str = "r") -> list[str]:
    return ["run", "--strategy", "pike-o", "--suite", "smoke", "--tasks", "1", "--llm", "openai:fake-coder",
            "--llm-base-url", server.openai_base_url, "--query-budget", str(budget), "--evaluator", "scripted",
            "--output-dir", str(out), "--run-name", name, *extra]


def scripted(*args: str, env: dict[str, str]):
    """``pikeh`` in this process with the scripted evaluator installed."""
    return invoke(*args, plugins={"scripted": scripted_evaluator_plugin()}, env=env)


class Trace:
    """What a finished run journaled, joined with what the fake model received, by serial number."""

    def __init__(self, run_dir: Path, prompts: dict[int, str]):
        self.run_dir = run_dir
        self.events = read_journal(run_dir / "journal.jsonl")
        self.llm = [e for e in self.events if e["type"] == "llm"]
        self.attempts = {e["key"]: e for e in self.events if e["type"] == "attempt"}
        self.serial = {e["key"]: serial_of(e["response"]["text"]) for e in self.llm}
        self.prompt = {key: prompts[serial] for key, serial in self.serial.items()}
        self.tag = {e["key"]: tag_of(code_fences.extract_code(e["response"]["text"])) for e in self.llm}
        # The reference's evaluation is the host's eager baseline (PIKE-O reuses it).
        initial = next(e for e in self.events if e["type"] == "eval" and e["key"] == "baseline/eager")
        self.reference_ms = initial["result"]["runtime_ms"]

    def fitness_text(self, key: str | None) -> str:
        runtime = self.reference_ms if key is None else self.attempts[key]["runtime_ms"]
        return format_fitness(1.0 / runtime if runtime else 0.0)

    def key_of_tag(self, tag: str) -> str | None:
        if tag == "reference":
            return None
        return next(key for key, t in self.tag.items() if t == tag)

    def options(self) -> dict:
        return json.loads((self.run_dir / "run.json").read_text())["config"]["strategy_options"]


def recording(coder: FakeCoder):
    """The fake model, keeping every prompt under the serial number of its reply."""
    prompts: dict[int, str] = {}

    def reply(request):
        answer = coder(request)
        prompts[serial_of(answer.text)] = request.prompt_text
        return answer

    return reply, prompts


def test_crossover_iterations_in_flight_islands_migration_and_fixes_seen_by_the_model(tmp_path):
    reply, prompts = recording(FakeCoder(broken={2}))
    with FakeLLMServer(reply=reply) as server:
        result = scripted(*run_args(server, tmp_path, "--parallel-evaluations", "1", "--num-islands", "2",
                               "--max-fix-attempts", "1", "--migration-interval", "1", "--migration-rate", "1",
                               "--llm-concurrency", "3", budget=5), env=KEY_ENV)
        assert result.exit_code == 0, result.output
        requests = list(server.requests)
    trace = Trace(tmp_path / "r", prompts)

    # W=1 over 2 islands: 2 iterations in flight; the broken child's fix (counted); then one new
    # iteration each time the oldest finishes, until the budget of 5 is reached: never past it.
    assert len(requests) == 5 == len(trace.llm)
    # PIKE-O's sampling, set by the strategy over the run's: top_p 0.95 and no top_k.
    assert all(r.body["top_p"] == 0.95 and "top_k" not in r.body and r.body["temperature"] == 0.8 for r in requests)
    assert sorted(e["index"] for e in trace.llm if e["counted"]) == list(range(1, 6))
    broken_key = next(k for k, s in trace.serial.items() if s == 2)
    assert broken_key in ("it0000", "it0001")
    assert sorted(trace.serial) == sorted(["it0000", "it0001", "it0002", f"{broken_key}/fix1", "it0003"])
    fix_prompt = trace.prompt[f"{broken_key}/fix1"]
    assert prompt_kinds.prompt_kind(fix_prompt) == "fix" and tag_of(prompt_kinds.quoted_program(fix_prompt)) == "s2"
    assert "failed to compile, failed the correctness check, or timed out" in fix_prompt  # PIKE-O's EFA
    assert trace.attempts[f"{broken_key}/fix1"]["category"] == "correct"
    assert [trace.attempts[f"it000{i}"]["meta"]["island"] for i in range(4)] == [0, 1, 0, 1]

    for number, key in enumerate(("it0000", "it0001", "it0002", "it0003")):
        prompt, meta = trace.prompt[key], trace.attempts[key]["meta"]
        assert is_crossover(prompt)
        sections = crossover_sections(prompt)
        # The current program is the journaled parent, with its fitness (1 / runtime).
        parent = trace.attempts[key]["parent"]
        assert tag_of(sections.current) == (trace.tag[parent] if parent else "reference")
        assert sections.fitness == trace.fitness_text(parent)
        assert meta["child_island"] == meta["parent_island"]  # the child joins its parent's island
        shown = [tag_of(p) for p in sections.tops + sections.inspirations]
        fitnesses = sections.top_fitness + sections.inspiration_fitness
        assert fitnesses == [trace.fitness_text(trace.key_of_tag(t)) for t in shown]
        assert [i.split("@")[0] for i in meta["top"] + meta["inspirations"]] == [
            trace.key_of_tag(t) or "reference" for t in shown]
        assert "s2" not in shown and tag_of(sections.current) != "s2"  # the fixed program replaced it
        if meta["pool"].startswith("archive"):  # an exploitation parent is never the reference
            assert tag_of(sections.current) != "reference" and not meta["parent_is_reference"]
        if number < 2:  # the first two were in flight together: only the reference existed
            assert parent is None and shown in ([], ["reference"])
    # Migration to both neighbours (with 2 islands, the other one): island 1's prompt (it0003) shows
    # copies of island 0's programs among the island's own (top, diverse, inspirations). Its parent is
    # not checked here: an exploitation draw takes it from the archive, which spans the islands.
    island1 = trace.attempts["it0003"]["meta"]
    copies = [i for i in [*island1["top"], *island1["diverse"], *island1["inspirations"]] if "@m" in i]
    assert copies and all(i.endswith("@m1") for i in copies)

    assert trace.options() == dataclasses.asdict(PikeOConfig(
        parallel_evaluations=1, num_islands=2, max_fix_attempts=1, migration_interval=1, migration_rate=1.0))
    log = (tmp_path / "r" / "log.txt").read_text()
    assert "migration 1 after iteration 0" in log and ": 4 iterations; " in log


def test_mutation_preset_from_a_config_file_keeps_two_iterations_in_flight(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('[strategy]\npreset = "mut,npar"\nnum_islands = 2\nmigration_rate = 0.5\n'
                      'max_fix_attempts = 1\n', encoding="utf-8")
    reply, prompts = recording(FakeCoder(broken={1}))
    with FakeLLMServer(reply=reply) as server:
        result = scripted(*run_args(server, tmp_path, "--config", str(config), "--num-islands", "1", budget=4),
                     env=KEY_ENV)
        assert result.exit_code == 0, result.output
    trace = Trace(tmp_path / "r", prompts)

    # Preset, then the file, then the command line: recorded resolved.
    assert trace.options() == dataclasses.asdict(PikeOConfig(preset="mut,npar", num_islands=1, migration_rate=0.5,
                                                              max_fix_attempts=1))
    assert trace.options()["template"] == "mutation" and trace.options()["parallel_evaluations"] == 1
    # npar is not strictly sequential: 2 iterations in flight with one island, then the broken one's fix
    # and the next iteration. Those two take the last two queries in either order (a fix charges when
    # its verdict arrives, the next iteration when the oldest in flight ends): with a budget of 3 they
    # raced for the last query, and CI once saw it0002 win (2026-11-29).
    broken_key = next(k for k, s in trace.serial.items() if s == 1)
    assert broken_key in ("it0000", "it0001")
    assert sorted(trace.serial) == sorted(["it0000", "it0001", "it0002", f"{broken_key}/fix1"])
    for key in ("it0000", "it0001"):
        prompt = trace.prompt[key]
        assert not is_crossover(prompt) and prompt_kinds.prompt_kind(prompt) == "improve"
        blocks = code_fences.code_blocks(prompt)
        assert len(blocks) == 4 and blocks[:2] == [p + "\n" for p in prompt_templates.example_pair()]
        assert tag_of(blocks[2]) == "reference" and tag_of(blocks[3]) == "reference"
        assert "itness" not in prompt
        assert trace.attempts[key]["parent"] is None


def _wait_for(predicate, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_sigkill_mid_wave_and_mid_evaluation_then_resume(tmp_path):
    """Kill -9 while the 2nd and the 4th request are in flight, then during an evaluation; the resumed
    run finishes with each query answered once in the journal and no prompt re-sent after its answer
    was journaled."""
    holder: dict[str, subprocess.Popen] = {}
    kill_at = {2, 4}

    def on_request(serial: int) -> None:
        if serial in kill_at:
            holder["proc"].send_signal(signal.SIGKILL)

    # Each scripted evaluation of a run that is killed stays in flight a second, so the third kill can
    # come during one.
    env = {**os.environ, **KEY_ENV, "PYTHONUNBUFFERED": "1"}
    reply, prompts = recording(FakeCoder(broken={1}, on_request=on_request))
    with FakeLLMServer(reply=reply) as server:
        cmd = [sys.executable, SCRIPTED_PIKEH,
               *run_args(server, tmp_path, "--parallel-evaluations", "2", "--num-islands", "2",
                         "--max-fix-attempts", "1", "--llm-concurrency", "2", budget=4)]

        def start(eval_seconds: str = "1.0") -> subprocess.Popen:
            holder["proc"] = subprocess.Popen(cmd, env={**env, "SCRIPTED_EVAL_SECONDS": eval_seconds},
                                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            return holder["proc"]

        for _ in kill_at:
            assert start().wait(timeout=600) == -signal.SIGKILL
        # The third kill waits for an evaluation in flight: 5 s each leaves the test room to be
        # descheduled on a loaded machine between seeing one and killing (1 s did not, by a margin).
        proc = start(eval_seconds="5.0")

        def evaluating() -> bool:
            events = read_journal(tmp_path / "r" / "journal.jsonl")
            started = {e["key"] for e in events if e["type"] == "eval_start"}
            done = {e["key"] for e in events if e["type"] == "eval"}
            return bool(started - done - {"baseline/eager", "initial"}) and len(done) >= 3

        _wait_for(evaluating)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL, "the run ended before the kill reached it"
        final = start(eval_seconds="0")  # nothing is killed now: no evaluation needs to stay in flight
        output, _ = final.communicate(timeout=600)
        assert final.returncode == 0, output[-3000:]
        sent = len(server.requests)

    events = read_journal(tmp_path / "r" / "journal.jsonl")
    llm = [e for e in events if e["type"] == "llm"]
    assert len({e["key"] for e in llm}) == len(llm) and len(llm) >= 4
    counted = sorted(e["index"] for e in llm if e["counted"])
    assert counted == list(range(1, 5))  # the budget of 4, never more: no fix fits after 4 iterations
    attempts = [e for e in events if e["type"] == "attempt"]
    assert len({e["key"] for e in attempts}) == len(attempts) == len(llm)
    # The reference is evaluated once (the host's baseline) and never again as PIKE-O's "initial".
    assert sum(e["type"] == "eval" and e["key"] == "baseline/eager" for e in events) == 1
    assert not any(e["type"] == "eval" and e["key"] == "initial" for e in events)
    # Sends that never reached the journal were in flight at a kill (at most the concurrency limit of 2
    # per kill); each was sent again later and answered then. Identical prompts (two islands' first
    # iterations) can share a text, so a send is matched to a later journaled send of the same text.
    journaled = {serial_of(e["response"]["text"]) for e in llm}
    assert len(journaled) == len(llm)
    unjournaled = set(range(1, sent + 1)) - journaled
    assert len(unjournaled) <= 3 * 2, sorted(unjournaled)
    # A send the kill cut short reached the server without its body: there is no prompt to look for.
    # Prompts are looked up by the serial the model gave them, not by the order the server logged
    # them in: two concurrent sends may be logged in one order and numbered in the other.
    for serial in sorted(s for s in unjournaled if prompts.get(s)):
        text = prompts[serial]
        assert any(prompts.get(s) == text for s in journaled if s > serial), serial
    # A finished run replays entirely from its journal: running it again sends nothing.
    with FakeLLMServer(reply=FakeCoder(broken={1})) as again_server:
        again = scripted(*run_args(again_server, tmp_path, "--parallel-evaluations", "2", "--num-islands", "2",
                                   "--max-fix-attempts", "1", "--llm-concurrency", "2", budget=4), env=KEY_ENV)
        assert again.exit_code == 0, again.output[-2000:]
        assert again_server.count() == 0
    # The replayed search made the same decisions: every parent it named was journaled before it.
    seen: set[str | None] = {None}
    for e in attempts:
        assert e["parent"] in seen, e
        seen.add(e["key"])
    assert sum(e["type"] == "run_start" for e in events) == 4
    assert [e["status"] for e in events if e["type"] == "run_end"] == ["complete"]


def test_pikeh_report_shows_pike_b_and_pike_o_side_by_side(cli, tmp_path):
    out = tmp_path / "runs"
    with FakeLLMServer(reply=FakeCoder()) as server:
        common = ["--suite", "smoke", "--tasks", "1", "--llm", "openai:fake-coder", "--llm-base-url",
                  server.openai_base_url, "--query-budget", "2", "--evaluator", "scripted", "--output-dir", str(out)]
        pike_o = scripted("run", "--strategy", "pike-o", "--preset", "mut,npar,1isl", "--run-name", "o", *common,
                     env=KEY_ENV)
        assert pike_o.exit_code == 0, pike_o.output
        pike_b = scripted("run", "--strategy", "pike-b", "--no-brainstorm", "--num-branches", "2",
                     "--max-fix-attempts", "0", "--run-name", "b", *common, env=KEY_ENV)
        assert pike_b.exit_code == 0, pike_b.output
    report = cli("report", "--input", str(out), "--output", str(tmp_path / "report"), "--format", "csv", "--json")
    assert report.exit_code == 0, report.output
    rows = json.loads(report.stdout[report.stdout.index("["):])
    by_run = {row["run"]: row for row in rows}
    assert by_run["o"]["strategy"] == "pike-o" and by_run["b"]["strategy"] == "pike-b"
