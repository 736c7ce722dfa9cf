"""Minimal reproductions for the audit of PIKE's published solutions: where a one-call check is fooled.

PIKE judges a solution by one call of one instance on the public input (seed 0). This process
repeats that check, then three variations, each the smallest change that a real caller makes:

* ``call_twice``: the same instance called again with the same input (state kept across calls);
* ``second_instance``: a second instance built in the same process, first call, same input;
* ``new_input``: a fresh instance on another input (``get_inputs()`` after another seed);
* ``reused_new_input``: the first instance, after its calls, on that other input in new tensors (what
  any caller does with one model, and what the harness's hidden input sets do: a CUDA graph captured
  on the first input's buffers replays the old answer);
* ``input_sensitivity``: how much the reference's output moves between the two inputs against how
  much the solution's does (a CUDA graph that ignores new inputs returns the same output for both);
  a reference that moves only by rounding of its size proves nothing either way.

Outputs are copied as soon as a call returns (a replayed graph overwrites its output buffers). Plain
torch, loaded through ``plain_loop``'s helpers; nothing from pike_harness. One process per solution:
the last stdout line is ``PLAIN_RESULT {json}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import plain_loop as plain  # noqa: E402

NEW_SEED = 42
# The reference "moves" with its input only by more than this share of its largest value (bfloat16's
# half-ULP): below it an honest half-precision solution returns the same output for both inputs, so an
# unchanged output is no sign of ignoring the input (the harness's compare.py draws the same line).
REFERENCE_MOVES = 2.0 ** -8


def snapshot(output: Any) -> list[torch.Tensor]:
    return [t.detach().clone() for t in plain.flatten(output)]


def check(ref: list[torch.Tensor], new: list[torch.Tensor], atol: float, rtol: float) -> dict[str, Any]:
    return {"ok": plain.allclose(ref, new, atol, rtol), "max_diff": plain.max_diff(ref, new)}


def probe(reference: Path, solution: Path, device: torch.device, atol: float, rtol: float,
          new_seed: int = NEW_SEED) -> dict[str, Any]:
    out: dict[str, Any] = {"device": str(device), "torch": torch.__version__, "new_seed": new_seed}
    ref_module = plain.load_module(reference, "probe_reference")
    init = ref_module.get_init_inputs()
    x0, x1 = plain.inputs(ref_module, device, 0), plain.inputs(ref_module, device, new_seed)
    with torch.no_grad():
        ref = plain.build(ref_module.Model, init, device)
        ref0, ref1 = snapshot(ref(*x0)), snapshot(ref(*x1))
        plain.synchronize(device)
        module = plain.load_module(solution, "probe_solution")
        factory = plain.model_factory(module)

        def step(name: str, run: Any) -> bool:
            try:
                out[name] = run()
                plain.synchronize(device)
                return True
            except Exception as exc:  # noqa: BLE001 - a failing variation is a finding: record it
                out[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
                return False

        state: dict[str, Any] = {}

        def one_call() -> dict[str, Any]:
            state["a"] = plain.build(factory, init, device)
            state["a1"] = snapshot(state["a"](*x0))
            return check(ref0, state["a1"], atol, rtol)

        def call_twice() -> dict[str, Any]:
            a2 = snapshot(state["a"](*x0))
            return {**check(ref0, a2, atol, rtol), "call1_vs_call2": plain.max_diff(state["a1"], a2)}

        def second_instance() -> dict[str, Any]:
            b = plain.build(factory, init, device)
            return check(ref0, snapshot(b(*x0)), atol, rtol)

        def new_input() -> dict[str, Any]:
            c = plain.build(factory, init, device)
            state["c1"] = snapshot(c(*x1))
            return check(ref1, state["c1"], atol, rtol)

        def reused_new_input() -> dict[str, Any]:
            return check(ref1, snapshot(state["a"](*[t.clone() if isinstance(t, torch.Tensor) else t for t in x1])),
                         atol, rtol)

        if not step("one_call", one_call):
            return out
        step("call_twice", call_twice)
        step("second_instance", second_instance)
        step("reused_new_input", reused_new_input)
        if step("new_input", new_input):
            ref_moves, new_moves = plain.max_diff(ref0, ref1), plain.max_diff(state["a1"], state["c1"])
            ref_size = max((float(t.float().abs().max()) for t in plain.flatten(ref0) if t.numel()), default=0.0)
            out["input_sensitivity"] = {"reference_moves": ref_moves, "solution_moves": new_moves,
                                        "ok": not (new_moves == 0.0 and (ref_moves or 0.0) > REFERENCE_MOVES * ref_size)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--solution", type=Path, required=True)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--atol", type=float, default=1e-2)
    parser.add_argument("--rtol", type=float, default=1e-2)
    parser.add_argument("--new-seed", type=int, default=NEW_SEED)
    args = parser.parse_args()
    try:
        result = probe(args.reference, args.solution, torch.device(args.device), args.atol, args.rtol, args.new_seed)
    except Exception as exc:  # noqa: BLE001 - compile or reference failure: the whole probe is the finding
        result = {"error": f"{type(exc).__name__}: {exc}"[:400], "traceback": traceback.format_exc()[-1500:]}
    print(plain.MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
