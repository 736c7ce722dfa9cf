"""Sources Python's parser cannot take for depth: a ``SyntaxError`` that says so for every caller, and the
candidate's ``compile_error/syntax`` end to end, never an exception out of ``Engine.submit``.

CPython 3.11 raises ``MemoryError`` (its parser's stack overflowed) or ``RecursionError`` (the AST
converter's limit) for them, and ``UnicodeEncodeError`` for a lone surrogate: the callers' ``except
SyntaxError`` let them through (``pikeh eval`` of ``_x = ---...1`` ended in a traceback from
``work_order.work_class``).
"""

from __future__ import annotations

import json

import pytest

from pike_harness.worker.python_ast import parse_python
from pike_harness.worker.supervise import static_checks
from pike_harness.worker.supervise.engine.work_order import PLAIN, work_class

MODEL = "\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
DEEP = {  # each past what the parser takes: MemoryError or RecursionError in CPython 3.11
    "unary minus": "_x = " + "-" * 20000 + "1\n",
    "not": "_x = " + "not " * 20000 + "1\n",
    "lambda": "_x = " + "lambda: " * 20000 + "1\n",
    "conditional": "_x = 1" + " if 1 else 1" * 20000 + "\n",
    "additions": "_x = 1" + "+1" * 20000 + "\n",  # parses; the AST converter's recursion limit
}


@pytest.mark.parametrize("name", DEEP)
def test_too_deep_a_source_is_a_syntax_error_naming_its_line(name):
    source = "import torch\n\n" + DEEP[name] + MODEL
    with pytest.raises(SyntaxError) as caught:
        parse_python(source, filename="candidate.py")
    assert "nested too deeply for Python's parser" in caught.value.msg
    assert caught.value.lineno == 3 and caught.value.filename == "candidate.py"


def test_a_deep_statement_over_many_lines_is_found_where_it_fails():
    source = "x = 1\ny = (" + "\n".join(["-"] * 20000) + "1)\nz = 2\n"
    with pytest.raises(SyntaxError) as caught:
        parse_python(source)
    assert caught.value.lineno is not None and 2 <= caught.value.lineno <= 20002


def test_a_lone_surrogate_is_a_syntax_error():
    with pytest.raises(SyntaxError, match="cannot be parsed.*surrogates"):
        parse_python('x = "\ud800"\n')


def test_deep_but_parsable_sources_still_parse():
    parse_python("_x = " + "-" * 500 + "1\n" + MODEL)


def test_the_static_checks_and_the_work_order_take_it_as_a_syntax_error():
    source = DEEP["unary minus"] + MODEL
    with pytest.raises(SyntaxError):
        static_checks.scan(source)
    assert work_class(source) == PLAIN


def test_the_offline_mutator_refuses_a_program_too_deep_to_rewrite():
    """A previous candidate that parses but nests past the interpreter's recursion limit: the renaming
    and ``ast.unparse`` recurse in Python; the mutator's answer for a program it cannot use."""
    from pikeh_offline import catalogue

    program = "import torch\n" + MODEL + "_x = " + "-" * 1500 + "1\n"
    with pytest.raises(SyntaxError, match="nested too deeply"):
        catalogue.base_from_program(program)


def test_pikeh_eval_of_a_too_deep_candidate_is_its_compile_error(cli, tmp_path):
    candidate = tmp_path / "deep.py"
    candidate.write_text("import torch.nn.functional as F\n" + DEEP["unary minus"] + MODEL)
    result = cli("eval", str(candidate), "--task", "smoke/5", "--device", "cpu", "--protocol", "quick",
                 "--json", "--prestart", "0")
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    assert (record["category"], record["check"]) == ("compile_error", "syntax"), record
    assert record["reason"] == "SyntaxError: line 2: the source is nested too deeply for Python's parser (MemoryError)"
