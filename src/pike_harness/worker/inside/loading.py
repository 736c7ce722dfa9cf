"""Turning KernelBench-format sources into modules, models and inputs, the way PIKE's evaluator does.

Shared by everything that runs a task's code (the eval worker, the task audit, baselines), so all of
them seed, construct and feed models identically: inputs drawn after ``torch.manual_seed(input_seed)``,
each model constructed after ``torch.manual_seed(weight_seed)`` (equal layer order gives equal
weights), models in ``.eval()``. torch and the standard library only.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib.util
import random
import secrets
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from pike_harness.worker.python_ast import parse_python

MODEL_CLASS_PREFERENCE = ("ModelNew", "Model")


def load_source(source: str, name: str, *, directory: Path | None = None) -> types.ModuleType:
    """Execute ``source`` as a fresh module registered in ``sys.modules``.

    The module gets a real file (in ``directory`` when given) because ``torch.compile``, ``inspect``
    and Triton's JIT read the source of the functions they compile; registering it lets pickling
    and dataclasses find it. ``name`` should be unique per source.
    """
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def module_name_for(source: str, prefix: str) -> str:
    """A stable, unique module name for a source text (identical sources share build caches)."""
    return f"{prefix}_{hashlib.sha256(source.encode()).hexdigest()[:16]}"


def model_class(module: types.ModuleType, preference: Sequence[str] = MODEL_CLASS_PREFERENCE) -> Callable[..., Any]:
    """``ModelNew`` when the module defines it, else ``Model`` (PIKE's rule for candidates).

    Any callable counts, not only a class: KernelBench and PIKE call ``ModelNew(*init_inputs)`` and
    accept a factory function that returns an ``nn.Module``. A module *instance* is callable too, but
    calling it runs ``forward`` with the constructor's arguments, so it is never taken for a factory.
    """
    for name in preference:
        candidate = getattr(module, name, None)
        if callable(candidate) and not isinstance(candidate, torch.nn.Module):
            return candidate
    raise AttributeError(f"defines none of {', '.join(preference)}")


def init_inputs(module: types.ModuleType) -> list[Any]:
    return list(module.get_init_inputs())


def make_inputs(module: types.ModuleType, seed: int) -> list[Any]:
    """The task's inputs for one seed, on the CPU as ``get_inputs`` makes them.

    Python's and numpy's generators are seeded too, so a ``get_inputs`` that uses them gives the
    same inputs in the reference's process as in the candidate's.
    """
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)
    return list(module.get_inputs())


_is_instance, _Tensor = builtins.isinstance, torch.Tensor  # taken at import, before any candidate's code


def input_signature(values: Sequence[Any]) -> tuple[tuple[tuple[int, ...], str] | None, ...]:
    """What a timed loop holds fixed over a task's input sets: each position's tensor shape and dtype
    (None for a value that is not a tensor, which is passed as it is). Why: every call of a timing
    run reuses one buffer per tensor input, so a task whose shapes follow the seed cannot be timed;
    and a candidate that changes a kept input set's shape in place (``unsqueeze_`` on set 0, which
    the timed loop's buffers are cloned from) must not make every fresh set unfit (``child._time``)."""
    return tuple((tuple(value.shape), str(value.dtype)) if _is_instance(value, _Tensor) else None
                 for value in values)


def inputs_within(module: types.ModuleType, seeds: Iterable[int], max_bytes: int) -> list[list[Any]]:
    """The task's inputs for each of ``seeds`` in order (``make_inputs``), as long as their tensors take
    ``max_bytes`` at most in all; then torch's, Python's and numpy's generators are seeded at random,
    so that none of ``seeds`` stays readable (``torch.initial_seed()``) once other code runs here.
    A set is not made when one more of the last set's size would not fit (a task's sets are all of one
    size: the reference process holds it to that): making it only to drop it cost level3-pike's tasks
    with sets of 48-214 MB as much as another set, on every evaluation."""
    made: list[list[Any]] = []
    total = last = 0
    seeded = False
    for seed in seeds:
        seeded = True
        if made and total + last > max_bytes:
            break
        values = make_inputs(module, seed)
        last = _tensor_bytes(values)
        if total + last > max_bytes:
            break
        total += last
        made.append(values)
    if seeded:
        torch.manual_seed(secrets.randbits(62))
        random.seed(secrets.randbits(62))
        numpy = sys.modules.get("numpy")
        if numpy is not None:
            numpy.random.seed(secrets.randbits(32))
    return made


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(_tensor_bytes(item) for item in value)
    return 0


def build_model(factory: Callable[..., Any], args: Sequence[Any], *, weight_seed: int,
                device: torch.device | str) -> torch.nn.Module:
    """Construct under the weight seed, then move to ``device`` and switch to eval mode (BN running stats).

    ``factory`` is the class or a function returning the model; what it returns must be callable.
    """
    torch.manual_seed(weight_seed)
    model = factory(*args)
    if not callable(model):
        kind = type(model)
        raise TypeError(f"{getattr(factory, '__name__', 'the model factory')}(...) returned a "
                        f"{kind.__module__}.{kind.__qualname__}, not a callable model")
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    return model


def to_device(values: Sequence[Any], device: torch.device | str) -> list[Any]:
    """Fresh device copies of tensor inputs (never the originals: candidates may mutate inputs)."""
    out = []
    for value in values:
        if isinstance(value, torch.Tensor):
            out.append(value.detach().to(device, copy=True))
        else:
            out.append(value)
    return out


def inputs_only_source(task_source: str) -> str:
    """The task source without its classes: enough to call ``get_inputs`` and ``get_init_inputs``.

    A candidate's process needs the task's inputs but must not hold the reference ``Model`` (a
    candidate could otherwise call it and pass off its output as its own).
    """
    tree = parse_python(task_source)
    tree.body = [node for node in tree.body if not isinstance(node, ast.ClassDef)
                 and not (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                          and node.name in MODEL_CLASS_PREFERENCE)]  # a factory ``def Model`` is the reference too
    return ast.unparse(tree)
