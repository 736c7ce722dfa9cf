"""The transformations ``offline:mutate`` applies, and the programs it writes from them.

Every program is the task's reference source with ``class Model`` renamed to ``_Reference`` (the
evaluator rejects a checked call that runs the in-file ``Model``'s code; a renamed copy is the program's
own eager code, flagged ``runs_reference_copy``),
followed by a ``ModelNew`` that builds ``_Reference`` from the same constructor arguments (same
parameters created in the same order, so the same weights under the same seed) and runs it through the
chosen transformations. A header line records the transformations, so a later prompt quoting the
program can be read back: a fix removes the deliberate breakage, an improvement adds a transformation.

Transformations are real and correct on CPU and GPU (outputs within 1e-2 of the reference) unless
deliberately broken; some make the program faster (inference mode, conv+BN folding, channels_last for
convolutions, torch.compile, half precision where allowed), one slower (redundant recomputation), so a
search has something to find.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from pike_harness.api import parse_python

MARKER = "# pikeh-mutate:"
REFERENCE_CLASS = "_Reference"
PARENT_CLASS = "_Parent"
_MARKER_LINE = re.compile(r"^# pikeh-mutate: transforms=(?P<transforms>[\w,]*)(?: broken=(?P<broken>\w+))?",
                          re.MULTILINE)


@dataclass(frozen=True)
class Features:
    """What the reference contains, deciding which transformations apply."""

    conv: bool
    batchnorm: bool
    half: str | None  # reduced precision the prompt allows ("bf16" / "fp16"), else None

    @classmethod
    def of(cls, source: str, half: str | None) -> Features:
        return cls(conv=bool(re.search(r"\bConv[123]d\b|\bconv[123]d\b", source)),
                   batchnorm="BatchNorm2d" in source, half=half)


@dataclass(frozen=True)
class Transform:
    name: str
    weight: int  # relative chance of being picked
    effect: str  # what it does to speed: faster / slower / varies
    idea: str  # how a brainstorm line words it
    keywords: tuple[str, ...]  # words in a "Focus on:" idea that ask for it

    def applies(self, features: Features) -> bool:
        if self.name == "fold_conv_bn":
            return features.conv and features.batchnorm
        if self.name == "channels_last":
            return features.conv
        if self.name == "half":
            return features.half is not None
        return True


CATALOGUE: tuple[Transform, ...] = (
    Transform("inference_mode", 3, "faster", "Run the forward pass under torch.inference_mode to drop "
              "autograd bookkeeping on every call.", ("inference", "autograd", "bookkeeping")),
    Transform("fold_conv_bn", 3, "faster", "Fold each BatchNorm into the preceding convolution's weights and "
              "bias (eval mode), removing a whole pass over the activations.", ("fold", "batchnorm", "bn")),
    Transform("channels_last", 2, "varies", "Use the channels_last memory format for convolutions so the "
              "kernels read NHWC tiles.", ("channels_last", "nhwc", "memory format", "layout")),
    Transform("half", 2, "faster", "Compute in reduced precision (bfloat16/float16) where the tolerance "
              "allows, casting the outputs back.", ("half", "bf16", "fp16", "bfloat16", "float16", "precision")),
    Transform("compile", 1, "faster", "Compile the forward pass with torch.compile so elementwise operators "
              "fuse into generated kernels.", ("compile", "fuse", "fusion", "triton")),
    Transform("recompute", 1, "slower", "Recompute the forward pass to double-check results (redundant "
              "work).", ("recompute", "redundant")),
)
BY_NAME = {t.name: t for t in CATALOGUE}
ORDER = {t.name: i for i, t in enumerate(CATALOGUE)}
BREAKS = ("syntax_error", "runtime_error", "wrong_output")
# Transforms that most often cause a correct-looking program to fail somewhere (no C++ compiler for
# torch.compile, a tolerance too tight for half precision): a fix drops these first.
RISKY = ("compile", "half", "recompute")


def applicable(features: Features, *, allow_compile: bool = True) -> list[Transform]:
    return [t for t in CATALOGUE if t.applies(features) and (allow_compile or t.name != "compile")]


def canonical(names: set[str] | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(set(names), key=lambda n: ORDER.get(n, len(ORDER))))


def read_marker(program: str) -> tuple[tuple[str, ...], str | None] | None:
    """(transforms, broken) from a program this module wrote; None for any other program."""
    match = _MARKER_LINE.search(program)
    if not match:
        return None
    names = tuple(n for n in match["transforms"].split(",") if n in BY_NAME)
    return canonical(names), match["broken"]


# -- sources ----------------------------------------------------------------------------------------

class _Rename(ast.NodeTransformer):
    """Renames classes (definitions and uses) and drops docstrings, so the reference's name is gone."""

    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        node.name = self.mapping.get(node.name, node.name)
        self._drop_docstring(node)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self._drop_docstring(node)
        self.generic_visit(node)
        return node

    @staticmethod
    def _drop_docstring(node: ast.ClassDef | ast.FunctionDef) -> None:
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]


def renamed_source(source: str, mapping: dict[str, str]) -> str:
    """``source`` with the classes in ``mapping`` renamed everywhere; raises SyntaxError if unparsable.

    The renaming and ``ast.unparse`` recurse in Python: a program that parses but nests deeper than the
    interpreter's recursion limit (a previous candidate's ``- - - ... 1``) is as unusable as one that
    does not parse, so its ``RecursionError`` is a ``SyntaxError`` too (the callers' answer for both)."""
    tree = parse_python(source)
    try:
        tree = _Rename(mapping).visit(tree)
        ast.fix_missing_locations(tree)
        return ast.unparse(tree)
    except RecursionError:
        raise SyntaxError("the program is nested too deeply to be rewritten") from None


def base_from_reference(reference: str) -> str:
    return renamed_source(reference, {"Model": REFERENCE_CLASS})


def base_from_program(program: str) -> str:
    """A foreign program (not ours) as a base class: its ModelNew becomes ``_Parent``."""
    return renamed_source(program, {"ModelNew": PARENT_CLASS, "Model": REFERENCE_CLASS})


# -- the emitted program ---------------------------------------------------------------------------

_HELPERS = '''
def _map_tensors(fn, value):
    """Apply ``fn`` to every tensor in a (possibly nested) output."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(fn, v) for v in value)
    if isinstance(value, dict):
        return {k: _map_tensors(fn, v) for k, v in value.items()}
    return value


def _device_key(args):
    for arg in args:
        if isinstance(arg, torch.Tensor):
            return (str(arg.device), str(arg.dtype))
    return ("cpu", "none")
'''

_FOLD_HELPER = '''
def _fold_conv_bn(module):
    """A copy of ``module`` with every BatchNorm2d that directly follows a Conv2d folded into it."""
    import torch.fx
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    module = copy.deepcopy(module)
    try:
        graph_module = torch.fx.symbolic_trace(module)
    except Exception:
        return module
    named = dict(graph_module.named_modules())
    folded = 0
    for node in list(graph_module.graph.nodes):
        if node.op != "call_module" or not isinstance(named.get(node.target), nn.BatchNorm2d):
            continue
        source = node.args[0]
        if not (isinstance(source, torch.fx.Node) and source.op == "call_module"
                and isinstance(named.get(source.target), nn.Conv2d) and len(source.users) == 1):
            continue
        fused = fuse_conv_bn_eval(named[source.target], named[node.target])
        parent_name, _, attr = source.target.rpartition(".")
        parent = graph_module.get_submodule(parent_name) if parent_name else graph_module
        setattr(parent, attr, fused)
        node.replace_all_uses_with(source)
        graph_module.graph.erase_node(node)
        folded += 1
    if not folded:
        return module
    graph_module.graph.lint()
    graph_module.recompile()
    graph_module.delete_all_unused_submodules()
    return graph_module
'''


def build_program(base: str, base_class: str, transforms: tuple[str, ...], *, broken: str | None = None,
                  half: str | None = None, origin: str = "the task's reference") -> str:
    """A complete candidate program: ``base`` (already renamed) plus a ``ModelNew`` using ``transforms``."""
    transforms = canonical(transforms)
    marker = f"{MARKER} transforms={','.join(transforms)}" + (f" broken={broken}" if broken else "")
    present = set(base.splitlines())
    imports = [line for line in ("import copy", "import torch", "import torch.nn as nn") if line not in present]
    header = [marker, f"# Written by offline:mutate (not an LLM) from {origin}.", *imports]
    helpers = _HELPERS + (_FOLD_HELPER if "fold_conv_bn" in transforms else "")
    program = "\n".join(header) + "\n" + base.rstrip() + "\n\n" + helpers + "\n\n" + _model_new(
        base_class, transforms, broken, half)
    if broken == "syntax_error":
        # A typical slip in generated code: the colon after a def is missing.
        program = program.replace("    def forward(self, *args):", "    def forward(self, *args)", 1)
    return program


def _model_new(base_class: str, transforms: tuple[str, ...], broken: str | None, half: str | None) -> str:
    build: list[str] = ["        module = self.inner"]
    if "fold_conv_bn" in transforms:
        build.append("        module = _fold_conv_bn(module)")
    if "channels_last" in transforms:
        build.append("        module = copy.deepcopy(module).to(memory_format=torch.channels_last)")
    if "half" in transforms:
        build.append("        module = copy.deepcopy(module).to(self._half_dtype(args))")
    if "compile" in transforms:
        build.append("        module = torch.compile(module)")
    build.append("        return module")

    prepare: list[str] = []
    if "channels_last" in transforms:
        prepare.append("        args = tuple(a.contiguous(memory_format=torch.channels_last) "
                       "if isinstance(a, torch.Tensor) and a.dim() == 4 else a for a in args)")
    if "half" in transforms:
        prepare += [
            "        dtype = self._half_dtype(args)",
            "        out_dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor) "
            "and a.is_floating_point()), torch.float32)",
            "        args = tuple(a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() "
            "else a for a in args)",
        ]
    call = ["        out = impl(*args)"]
    if "recompute" in transforms:
        call = ["        out = impl(*args)", "        out = impl(*args)"]
    if "inference_mode" in transforms:
        call = ["        with torch.inference_mode():"] + ["    " + line for line in call]
    after: list[str] = []
    if "half" in transforms:
        after.append("        out = _map_tensors(lambda t: t.to(out_dtype) if t.is_floating_point() else t, out)")
    if broken == "wrong_output":
        after.append("        out = _map_tensors(lambda t: t * 1.1 + 0.1, out)")
    elif broken == "runtime_error":
        after.append("        out = _map_tensors(lambda t: t @ t.new_ones(t.shape[-1] + 1, 1), out)")

    lines = [
        "class ModelNew(nn.Module):",
        f"    # transforms: {', '.join(transforms) or 'none'}",
        "    def __init__(self, *args, **kwargs):",
        "        super().__init__()",
        f"        self.inner = {base_class}(*args, **kwargs)",
        "        self._built = {}",
        "",
    ]
    if "half" in transforms:
        cpu, cuda = ("torch.bfloat16", "torch.bfloat16") if half == "bf16" else ("torch.bfloat16", "torch.float16")
        lines += [
            "    @staticmethod",
            "    def _half_dtype(args):",
            "        on_cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)",
            f"        return {cuda} if on_cuda else {cpu}",
            "",
        ]
    lines += [
        "    def _build(self, args):",
        *build,
        "",
        "    def forward(self, *args):",
        "        if self.training:",
        "            return self.inner(*args)",
        "        key = _device_key(args)",
        "        impl = self._built.get(key)",
        "        if impl is None:",
        "            with torch.no_grad():",
        "                impl = self._built[key] = self._build(args)",
        *prepare,
        *call,
        *after,
        "        return out",
        "",
    ]
    return "\n".join(lines)
