"""What a candidate's source says before it runs: harness access, reference inheritance, techniques.

A candidate may carry a copy of the task's ``Model`` (LLMs often do). Whether its checked calls
compute with it cannot be read from the source (building it in ``__init__`` to borrow its weights is
legitimate), so that is decided at run time by ``inside.reference_guard``. Naming the harness or its
task packages is an attempt to reach the reference or the checker: a rejection here. Inheriting
``Model`` is only noted. Whether any custom-kernel technique appears is a flag for reports, not a verdict. Standard
library only; the code is parsed, never executed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from pike_harness.worker import text_safety
from pike_harness.worker.python_ast import parse_python

REFERENCE_CLASS = "Model"
CANDIDATE_CLASS = "ModelNew"
HARNESS_MODULES = ("pike_harness", "pikeh_tasks", "pikeh_suites", "pikeh_local")
# dotted name (as written, or its last parts) -> technique
TECHNIQUES = {
    "load_inline": "load_inline", "cpp_extension": "load_inline", "triton": "triton",
    "torch.compile": "torch.compile", "CUDAGraph": "cuda_graph", "cuda.graph": "cuda_graph",
    "make_graphed_callables": "cuda_graph",
}
# Names by which a source reaches frames, objects or hooks the harness holds (a flag for whoever reads
# the result, never a verdict: in-process checks cannot stop such code, docs/evaluator.md threat 8).
INTROSPECTION = ("gc", "ctypes", "_getframe", "settrace", "setprofile", "inspect", "currentframe", "f_back",
                 "f_locals", "f_globals", "tb_frame", "_current_frames")


@dataclass
class StaticReport:
    check: str | None = None  # the rejection, if any
    reason: str | None = None
    flags: list[str] = field(default_factory=list)
    techniques: list[str] = field(default_factory=list)

    def reject(self, check: str, reason: str) -> None:
        if self.check is None:
            self.check, self.reason = check, reason


def scan(source: str) -> StaticReport:
    """Scan a candidate; raises SyntaxError for source that does not parse (a compile error)."""
    tree = parse_python(source)
    report = StaticReport()
    _harness_access(tree, report)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    candidate = classes.get(CANDIDATE_CLASS)
    if candidate is not None and REFERENCE_CLASS in classes:
        _reference_reuse(candidate, report)
    report.techniques = _techniques(tree)
    if not report.techniques:
        report.flags.append("no_custom_kernel")
    report.flags.extend(f"technique:{name}" for name in report.techniques)
    if any(_names(tree) & set(INTROSPECTION)):
        report.flags.append("introspection")
    if any(char in text_safety.BIDI_MARKS for char in source):  # "Trojan Source": a flag for whoever reads it
        report.flags.append("bidi_control")
    return report


def _names(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.update(node.name.split("."))
    return found


def _harness_access(tree: ast.AST, report: StaticReport) -> None:
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        for name in names:
            if any(name == module or name.startswith(module + ".") or (isinstance(node, ast.Constant) and module in name)
                   for module in HARNESS_MODULES):
                report.reject("harness_access", f"the candidate refers to the harness or its tasks ({name!r})")
                return


def _reference_reuse(candidate: ast.ClassDef, report: StaticReport) -> None:
    if any(isinstance(base, ast.Name) and base.id == REFERENCE_CLASS for base in candidate.bases):
        report.flags.append("inherits_reference_model")


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _techniques(tree: ast.AST) -> list[str]:
    """Custom-kernel techniques the source uses, by the names it writes (``torch.compile``, ``triton``...)."""
    written: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name):
            dotted = _dotted(node)
            if dotted:
                written.add(dotted)
        elif isinstance(node, ast.Import):
            written.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            written.update(f"{node.module}.{alias.name}" for alias in node.names)
    found: list[str] = []
    for name, technique in TECHNIQUES.items():
        if technique not in found and any(w == name or w.endswith("." + name) or w.startswith(name + ".")
                                          for w in written):
            found.append(technique)
    return found
