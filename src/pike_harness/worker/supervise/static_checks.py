"""What a candidate's source says before it runs: reference reuse, harness access, techniques used.

A candidate may carry a copy of the task's ``Model`` (LLMs often do). Wrapping it, calling its
``forward``, or falling back to it in a ``try/except`` passes the reference off as a kernel: those
are rejections. Naming the harness or its task packages is an attempt to reach the reference or the
checker: also a rejection. Inheriting ``Model`` only to reuse ``__init__`` is legitimate and only
noted. Whether any custom-kernel technique appears is a flag for reports, not a verdict. Standard
library only; the code is parsed, never executed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

REFERENCE_CLASS = "Model"
CANDIDATE_CLASS = "ModelNew"
HARNESS_MODULES = ("pike_harness", "pikeh_tasks", "pikeh_suites", "pikeh_local")
# dotted name (as written, or its last parts) -> technique
TECHNIQUES = {
    "load_inline": "load_inline", "cpp_extension": "load_inline", "triton": "triton",
    "torch.compile": "torch.compile", "CUDAGraph": "cuda_graph", "cuda.graph": "cuda_graph",
    "make_graphed_callables": "cuda_graph",
}
INTROSPECTION = ("gc", "ctypes", "_getframe", "settrace", "setprofile")


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
    tree = ast.parse(source)
    report = StaticReport()
    _harness_access(tree, report)
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    candidate = classes.get(CANDIDATE_CLASS)
    if candidate is not None and REFERENCE_CLASS in classes:
        _reference_reuse(tree, candidate, report)
    report.techniques = _techniques(tree)
    if not report.techniques:
        report.flags.append("no_custom_kernel")
    report.flags.extend(f"technique:{name}" for name in report.techniques)
    if any(_names(tree) & set(INTROSPECTION)):
        report.flags.append("introspection")
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


def _reference_holders(scope: list[ast.stmt]) -> set[str]:
    """Names and ``self.`` attributes that are assigned an instance of the reference Model."""
    holders = set()
    for top in scope:
        for node in ast.walk(top):
            if isinstance(node, ast.Assign) and _is_reference_call(node.value, False, set()):
                for target in node.targets:
                    if isinstance(target, ast.Attribute):
                        holders.add(target.attr)
                    elif isinstance(target, ast.Name):
                        holders.add(target.id)
    return holders


def _is_reference_call(node: ast.AST, inherits: bool, holders: set[str]) -> bool:
    """``Model(...)``, ``Model.forward(...)``, ``super().forward(...)`` in a class inheriting Model,
    or a call of something holding a Model instance (``self.ref(x)``, ``self.ref.forward(x)``)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name) and func.id in ({REFERENCE_CLASS} | holders):
        return True
    if isinstance(func, ast.Attribute) and func.attr in holders:
        return True
    if isinstance(func, ast.Attribute) and func.attr in ("forward", "__call__"):
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id in ({REFERENCE_CLASS} | holders):
            return True
        if isinstance(owner, ast.Attribute) and owner.attr in holders:
            return True
        if inherits and isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            return True
    return False


def _reference_reuse(tree: ast.Module, candidate: ast.ClassDef, report: StaticReport) -> None:
    inherits = any(isinstance(base, ast.Name) and base.id == REFERENCE_CLASS for base in candidate.bases)
    if inherits:
        report.flags.append("inherits_reference_model")
    # Everything but the reference class itself and a `if __name__ == "__main__":` block.
    scope = [node for node in tree.body
             if not (isinstance(node, ast.ClassDef) and node.name == REFERENCE_CLASS) and not _is_main_guard(node)]
    holders = _reference_holders(scope)
    for top in scope:
        for node in ast.walk(top):
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    if any(_is_reference_call(inner, inherits, holders)
                           for stmt in handler.body for inner in ast.walk(stmt)):
                        report.reject("reference_fallback",
                                      "the candidate falls back to the reference Model in an exception handler")
                        return
    for top in scope:
        for node in ast.walk(top):
            if _is_reference_call(node, inherits, holders):
                report.reject("calls_reference_model",
                              f"the candidate calls the reference Model (line {node.lineno})")
                return


def _is_main_guard(node: ast.stmt) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


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
