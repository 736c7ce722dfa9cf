"""Text a candidate wrote reaches terminals, reports and prompts only as visible characters: no terminal
control sequence, no bidi mark, no rich markup read from it. Checked on the result record (every way
one is made or read), on ``pikeh eval``'s output for a real hostile candidate, one file and a folder,
and on a run's progress lines and log.txt when a strategy's error quotes such text."""

from __future__ import annotations

import json

import pytest

from pike_harness.worker import text_safety
from pike_harness.worker.records import EvalResult

NO_POOL = ("--prestart", "0")
ESC, BEL, RLO = "\x1b", "\x07", "\u202e"
# A clipboard write (OSC 52), a screen clear, a right-to-left override, and markup that does not close
HOSTILE = f"[/x] {ESC}]52;c;SGVsbG8={BEL} [bold]{ESC}[2J{RLO}lave\r\n[Errno 2]\x9b31m"
CANDIDATE = f'''
import sys
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, *inputs):
        print({HOSTILE!r}, file=sys.stderr, flush=True)
        raise RuntimeError({HOSTILE!r})
'''


def _raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0 or c == RLO})


def test_printable_shows_controls_and_bidi_marks_and_keeps_lines_and_tabs():
    shown = text_safety.printable(HOSTILE + "\ttab\rbar\n")
    assert _raw_controls(shown) == []
    assert "\\x1b]52;c;SGVsbG8=\\x07" in shown and "\\x1b[2J\\u202elave" in shown and "\\x9b31m" in shown
    assert shown.endswith("\ttab\nbar\n") and "[/x]" in shown  # markup is the printer's business, not this
    plain = "an ordinary message: 1.5 ms, naïve café, 数字, [Errno 2]\n\tindented"
    assert text_safety.printable(plain) == plain


def test_printable_shows_every_surrogate_code_unit_and_keeps_valid_text():
    """A lone surrogate (a candidate's JSON ``"\\udcff"``, a file name read with surrogateescape) has no
    UTF-8 form: a terminal, DuckDB's JSON and a prompt's hash would raise on it. Each is shown as its
    escape, and so is each half of a pair written as two code units; a real non-BMP character stays."""
    cases = {"high \ud800 alone": "high \\ud800 alone", "low \udcff alone": "low \\udcff alone",
             "pair \ud83d\ude00 as two units": "pair \\ud83d\\ude00 as two units",
             "reversed \ude00\ud83d": "reversed \\ude00\\ud83d", "edges \udbff\udc00\udfff": "edges "
             "\\udbff\\udc00\\udfff"}
    for text, expected in cases.items():
        assert text_safety.printable(text) == expected
        assert text_safety.printable(text).encode("utf-8")  # no UnicodeEncodeError
    valid = "emoji \U0001f600, naïve café, 数字, \ud7ff\ue000 (the code points either side of the range)"
    assert text_safety.printable(valid) == valid


def test_a_record_with_lone_surrogates_is_valid_utf8_everywhere_it_goes():
    """A remote worker's record (or the child's channel message) is JSON, where ``"\\udcff"`` decodes to a
    lone surrogate: the result holds its escape, and its JSON, its failure report and the hash of a
    prompt that carries that report all encode as UTF-8."""
    from pike_harness.contracts.llm import LLMRequest, request_hash
    from pike_harness.kit.failure_reports import failure_report

    record = '{"request_id": "r", "task": "smoke/1", "category": "runtime_error", "check": "forward", ' \
             '"reason": "bad byte: \\udcff", "stderr_tail": "\\ud800 \\ud83d\\ude00", ' \
             '"environment": {"cleanup": ["\\udcff: Permission denied"], "jit_cache": "\\udc80"}}'
    result = EvalResult.from_json(record)
    assert result.reason == "bad byte: \\udcff" and result.stderr_tail == "\\ud800 \U0001f600"  # JSON's pair: one character
    assert result.environment == {"cleanup": ["\\udcff: Permission denied"], "jit_cache": "\\udc80"}
    result.to_json().encode("utf-8")
    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")
    report = failure_report(result)
    assert "bad byte: \\udcff" in report
    report.encode("utf-8")
    request_hash("p", "m", LLMRequest(messages=[{"role": "user", "content": report}]))


def test_a_cleanup_problem_naming_an_undecodable_file_is_escaped(tmp_path, monkeypatch):
    """A result's ``environment["cleanup"]`` quotes the names of files a removal could not delete; a
    name of undecodable bytes reaches Python with surrogates (surrogateescape), one with ESC as ESC."""
    import os

    from pike_harness.worker.supervise import trusted_files

    folder = tmp_path / "scratch"
    folder.mkdir()
    (folder / os.fsdecode(b"bad\xff\x1b[2J")).write_bytes(b"x")
    real_unlink = os.unlink

    def refuse(name, *args, **kwargs):  # a file the removal cannot delete (root deletes anything else)
        if isinstance(name, str) and name.startswith("bad"):
            raise PermissionError(1, "Operation not permitted")
        return real_unlink(name, *args, **kwargs)

    monkeypatch.setattr(trusted_files.os, "unlink", refuse)
    problems = trusted_files.remove_tree(folder)
    assert "bad\\udcff\\x1b[2J: Operation not permitted" in problems, problems
    assert all(_raw_controls(text) == [] and text.encode("utf-8") for text in problems)


def test_a_result_is_cleaned_however_it_was_made_or_read():
    """Made by a supervisor, or read from JSON a remote worker (or a candidate, where it can reach the
    queue's files) wrote: every string of it, nested ones included."""
    record = {"task": f"smoke/1{ESC}[8m", "category": "runtime_error", "check": f"exc{BEL}",
              "reason": HOSTILE, "stdout_tail": HOSTILE, "stderr_tail": HOSTILE, "flags": [HOSTILE],
              "environment": {HOSTILE: [HOSTILE, {"k": HOSTILE}]}, "profile": {"kernels": [{"name": HOSTILE}]},
              "outputs": [{"input_set": 0, "index": 0, "ok": False, "dtype": HOSTILE, "problem": HOSTILE}],
              "noise": {"flagged": HOSTILE},
              "paired": {"speedup": 1.0, "ci_low": 0.9, "ci_high": 1.1, "flagged": HOSTILE, "stop": HOSTILE,
                         "noise": {"flagged": HOSTILE}},
              "runtime": {"headline_ms": 1.0, "statistic": HOSTILE, "mean_ms": 1.0, "median_ms": 1.0, "min_ms": 1.0,
                          "max_ms": 1.0, "stdev_ms": 0.0, "cv": 0.0, "iqr_ms": 0.0, "n": 1, "host_wall_ms": 1.0,
                          HOSTILE: "a field no record has"},
              "protocol": {"name": HOSTILE}, "stage_seconds": {HOSTILE: 1.0}, "seeds": {"public": [HOSTILE]},
              "isolation": HOSTILE, "request_id": HOSTILE}
    read = EvalResult.from_json(json.dumps(record))
    made = EvalResult(request_id="r", task="smoke/1", category="runtime_error", reason=HOSTILE, stderr_tail=HOSTILE)
    # (an unknown field of a remote record, here one of its statistics, is dropped, not an error)
    for result in (read, made):
        assert _raw_controls(json.dumps(result.to_dict(), ensure_ascii=False)) == []
        assert "\\x1b]52" in (result.reason or "") and "\\x1b]52" in result.stderr_tail
    assert read.task == "smoke/1\\x1b[8m" and read.check == "exc\\x07"
    assert read.runtime is not None and read.runtime.statistic.startswith("[/x] \\x1b]52")
    assert read.paired is not None and read.paired.stop.startswith("[/x] \\x1b]52") and read.isolation.endswith("31m")
    assert read.paired is not None and read.paired.noise is not None and "\\u202e" in read.paired.noise.flagged


def test_no_string_of_a_result_outgrows_its_bound_and_no_secret_is_cut_in_two(monkeypatch):
    """A candidate can make its reason megabytes long (corpus ``forged_failed_huge_reason``); a result
    keeps ``MAX_TEXT_CHARS`` of each string, says how long it was, and a secret that straddled the cut
    is masked whole, not shown in part. Control characters that escaping lengthens are bounded too."""
    from pike_harness.worker.records import MAX_TEXT_CHARS

    secret = "sk-pikeh-test-0123456789abcdef"
    monkeypatch.setenv("PIKEH_TEST_API_KEY", secret)
    straddling = "A" * (MAX_TEXT_CHARS - 10) + secret + "B" * 3_000_000
    record = {"request_id": "r", "task": "smoke/1", "category": "runtime_error", "reason": straddling,
              "stderr_tail": "\x01" * 1_000_000, "flags": ["C" * 50_000], "environment": {"k": "D" * 50_000}}
    for result in (EvalResult.from_json(json.dumps(record)), EvalResult(**record)):
        for text in (result.reason, result.stderr_tail, result.flags[0], result.environment["k"]):
            assert text is not None and len(text) <= MAX_TEXT_CHARS + 80, len(text or "")
            assert text.endswith(" characters]") and "[cut: the first 20,000 of " in text
        assert secret[:6] not in (result.reason or ""), "no part of the secret"
        assert (result.reason or "").endswith(" ... [cut: the first 20,000 of 3,020,020 characters]")
        assert result.stderr_tail.startswith("\\x01\\x01")
    short = EvalResult(request_id="r", task="smoke/1", category="runtime_error", reason="boom")
    assert short.reason == "boom", "a string within the bound is kept as it is"


def test_pikeh_eval_prints_a_hostile_candidates_text_as_text(cli, tmp_path):
    candidate = tmp_path / "hostile.py"
    candidate.write_text(CANDIDATE, encoding="utf-8")
    result = cli("eval", str(candidate), "--task", "smoke/1", "--device", "cpu", "--protocol", "quick", *NO_POOL)
    assert result.exit_code == 0, result.output
    assert result.exception is None  # the candidate's own traceback is in its stderr, shown; ours is not
    assert "runtime_error" in result.output
    assert _raw_controls(result.output) == [], repr(result.output[-1500:])
    assert "[/x] \\x1b]52;c;SGVsbG8=\\x07 [bold]\\x1b[2J\\u202elave" in result.output  # the reason and stderr


def test_pikeh_eval_gives_the_verdict_of_a_candidate_raising_a_lone_surrogate(cli, tmp_path):
    """The real evaluator: a candidate's ``RuntimeError("\\udcff")`` crosses the child's JSON channel as a
    lone surrogate; ``pikeh eval`` prints its verdict table (no UnicodeEncodeError from the terminal)
    and its ``--json`` record is valid UTF-8, the surrogate shown as its escape."""
    from pike_harness.kit.failure_reports import failure_report

    candidate = tmp_path / "surrogate.py"
    candidate.write_text(CANDIDATE.replace(f"{HOSTILE!r}", repr("bad byte: \udcff \ud800")),
                         encoding="utf-8")
    assert "'bad byte: \\udcff \\ud800'" in candidate.read_text(encoding="utf-8")  # the source is UTF-8
    args = (str(candidate), "--task", "smoke/1", "--device", "cpu", "--protocol", "quick", *NO_POOL)
    table = cli("eval", *args)
    assert table.exit_code == 0 and table.exception is None, table.output
    assert "runtime_error" in table.output and "bad byte: \\udcff \\ud800" in table.output
    table.output.encode("utf-8")
    as_json = cli("eval", *args, "--json")
    assert as_json.exit_code == 0 and as_json.exception is None, as_json.output
    result = EvalResult.from_dict(json.loads(as_json.output.strip().splitlines()[-1]))
    assert result.category == "runtime_error" and "bad byte: \\udcff \\ud800" in (result.reason or "")
    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")
    failure_report(result).encode("utf-8")


def test_a_folder_with_a_hostile_candidate_gives_its_table(cli, tmp_path):
    folder = tmp_path / "solutions"
    folder.mkdir()
    (folder / "task_1.py").write_text(CANDIDATE, encoding="utf-8")
    result = cli("eval", str(folder), "--suite", "smoke", "--device", "cpu", "--protocol", "quick", *NO_POOL)
    assert result.exit_code == 0, result.output
    assert result.exception is None and _raw_controls(result.output) == []
    assert "task_1.py (smoke/1): " in result.output and "[/x] \\x1b]52" in result.output
    assert "1 of 1 candidates evaluated" in result.output


def test_errors_that_quote_a_worker_or_an_endpoint_are_shown_not_obeyed(monkeypatch):
    """An evaluator error may quote a remote worker's message, an LLM error the endpoint's error body:
    both come out escaped, and the evaluator's with this process's secrets masked (as a result is)."""
    from pike_harness.cli.llm_cmd import describe
    from pike_harness.contracts.evaluation import EvaluatorError
    from pike_harness.contracts.llm import LLMError, LLMResponse, Usage

    secret = "sk-text-safety-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    error = EvaluatorError(f"worker said: {HOSTILE} {secret}", attempts=2)
    assert _raw_controls(str(error)) == [] and secret not in str(error) and "[masked]" in str(error)
    assert error.attempts == 2 and "\\x1b]52" in str(error)
    assert _raw_controls(str(LLMError(HOSTILE, status=400))) == []
    reply = LLMResponse(text=HOSTILE, usage=Usage(prompt_tokens=1, output_tokens=1), latency_s=0.1, provider="p",
                        model="m")
    assert _raw_controls(describe(reply, "p:m")) == [] and "\\u202elave" in describe(reply, "p:m")


def test_bidi_marks_in_a_candidates_source_are_flagged():
    """Source that shows a reviewer one order of tokens and runs another: a flag, never a verdict."""
    from pike_harness.worker.supervise.static_checks import scan

    trojan = CANDIDATE.replace("super().__init__()", f"super().__init__()  # {RLO} ;)")
    assert "bidi_control" in scan(trojan).flags and scan(trojan).check is None
    assert "bidi_control" not in scan(CANDIDATE).flags


def test_a_result_with_an_unknown_category_is_refused_naming_it():
    """A remote worker (another version, or compromised) cannot hand the run a verdict it does not know:
    the record is refused, its category named, escaped like the rest of the record."""
    good = {"request_id": "r", "task": "smoke/1", "category": "incorrect"}
    for category in (f"excellent{ESC}[2J{RLO}", "[/x]", "", None, 7, ["correct"]):
        with pytest.raises(ValueError, match="unknown category") as caught:
            EvalResult.from_json(json.dumps({**good, "category": category}))
        assert _raw_controls(str(caught.value)) == [] and "not one of compile_error," in str(caught.value)
    with pytest.raises(ValueError, match=r"unknown category 'excellent\\x1b\[2J\\u202e'"):
        EvalResult(request_id="r", task="t", category=f"excellent{ESC}[2J{RLO}")
    assert EvalResult.from_json(json.dumps(good)).category == "incorrect"


def test_pikeh_evals_lines_hold_no_markup_of_a_remote_record(capsys):
    """Every line of ``pikeh eval``'s verdict prints a record's words as text: a remote worker's record
    may hold anything in its statistic's name (escaped of control characters already)."""
    from pathlib import Path

    from pike_harness.cli.eval_cmd import _print

    record = {"request_id": "r", "task": "smoke/1", "category": "correct", "runtime_ms": 1.0,
              "runtime": {"headline_ms": 1.0, "statistic": HOSTILE, "mean_ms": 1.0, "median_ms": 1.0, "min_ms": 1.0,
                          "max_ms": 1.0, "stdev_ms": 0.0, "cv": 0.0, "iqr_ms": 0.0, "n": 3, "host_wall_ms": 1.0},
              "outputs": [{"input_set": 0, "index": 0, "ok": True, "max_abs_diff": 0.0, "max_rel_diff": 0.0}]}
    _print(EvalResult.from_json(json.dumps(record)), Path("hostile.py"))
    out = capsys.readouterr().out
    assert _raw_controls(out) == [] and "runtime 1.0000 ms ([/x] \\x1b]52;c;SGVsbG8=\\x07 [bold]" in out


def test_a_strategy_error_quoting_an_answer_is_shown_not_obeyed(tmp_path, monkeypatch):
    """A strategy that chokes on an LLM's answer and quotes it (a real run on the local sandbox): the
    progress line and log.txt show the answer's text, its secrets masked, and obey none of it."""
    import types

    from pike_harness.api import Strategy, hookimpl
    from pike_harness.testing import invoke

    secret = "sk-strategy-0123456789abcdef"
    monkeypatch.setenv("PIKEH_SOME_BACKEND_API_KEY", secret)

    class QuotesAnswers(Strategy):
        name = "quotes-answers"

        def run_task(self, ctx):
            raise ValueError(f"no code block in the answer: {HOSTILE} {secret}")

    @hookimpl
    def register_strategies(register):
        register(QuotesAnswers)

    plugin = types.SimpleNamespace(register_strategies=register_strategies)
    result = invoke("run", "--strategy", "quotes-answers", "--suite", "smoke", "--tasks", "1", "--llm",
                    "offline:mutate", "--evaluator", "local", "--device", "cpu", "--protocol", "quick", *NO_POOL,
                    "--query-budget", "1", "--output-dir", str(tmp_path / "runs"), "--run-name", "r",
                    plugins={"quotes-answers": plugin})
    assert result.exit_code == 1, result.output  # the task failed: the run says so
    assert "smoke/1: strategy error (see log.txt): " in result.output
    log = (tmp_path / "runs" / "r" / "log.txt").read_text(encoding="utf-8")
    for text in (result.output, log):
        assert _raw_controls(text) == [] and secret not in text and "[masked]" in text
    assert "ValueError: no code block in the answer: [/x] \\x1b]52;c;SGVsbG8=\\x07 [bold]" in log
