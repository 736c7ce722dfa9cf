"""A fake model for whole PIKE-O runs: real programs, derived from the task's reference in the prompt.

Each answer is the reference with ``class Model`` renamed to ``ModelNew``, a tag line
(``# variant: s7 work=3``) naming the request that produced it, and ``work`` extra small matmuls per
forward call (slower, still correct). Requests whose serial number is in ``broken`` get a program
with a syntax error; a fix request gets a correct program tagged ``<failing tag>+fix``. Every reply
starts with ``<!-- serial N -->`` so a test can tell which send of a prompt reached the journal.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection

from pike_harness.kit import code_fences, prompt_kinds, prompt_templates
from pike_harness.testing.llm_server import FakeReply, ReceivedRequest

TAG = re.compile(r"# variant: (\S+) work=(\d+)")
SERIAL = re.compile(r"<!-- serial (\d+) -->")
_REFERENCE_MARKER = prompt_templates.REFERENCE_MARKER
_HELPER = '''

def _extra_work(n):
    pad = torch.ones(64, 64)
    for _ in range(n):
        torch.mm(pad, pad)
'''


def reference_of(prompt: str) -> str:
    """The task's reference: the block after the marker line, else (PIKE-O's fix prompt words it
    otherwise) the last block defining ``class Model`` (the worked example's comes first)."""
    if _REFERENCE_MARKER in prompt:
        return code_fences.code_blocks(prompt.split(_REFERENCE_MARKER, 1)[1])[0]
    return [b for b in code_fences.code_blocks(prompt) if "\nclass Model(" in "\n" + b][-1]


def derived(reference: str, tag: str, work: int) -> str:
    """The reference as a ``ModelNew`` program with a tag and ``work`` extra matmuls per call."""
    code = reference.replace("class Model(nn.Module):", "class ModelNew(nn.Module):")
    code = re.sub(r'\n    """[^\n]*"""\n', "\n", code, count=1)  # the class docstring
    code = re.sub(r"(\n    def forward\(self[^\n]*\):\n)", rf"\1        _extra_work({work})\n", code, count=1)
    head, sep, tail = code.partition("\n\n\nclass ModelNew")
    return f"# variant: {tag} work={work}\n{head}{_HELPER}{sep}{tail}"


def broken(tag: str) -> str:
    return f"import torch\n# variant: {tag} work=0\nclass ModelNew(torch.nn.Module)\n    pass\n"


def tag_of(program: str | None) -> str | None:
    """The tag of a program this model wrote, 'reference' for the task's reference, else None."""
    if program is None:
        return None
    match = TAG.search(program)
    if match:
        return match.group(1)
    return "reference" if re.search(r"^class Model\(nn\.Module\):", program, re.M) else None


def serial_of(text: str) -> int | None:
    match = SERIAL.search(text)
    return int(match.group(1)) if match else None


class FakeCoder:
    """The reply function (``FakeLLMServer(reply=FakeCoder(...))``)."""

    def __init__(self, *, broken: Collection[int] = (), work: int = 0,
                 on_request: Callable[[int], None] | None = None):
        self.broken = set(broken)
        self.work = work
        self.on_request = on_request
        self._serial = 0
        self._lock = threading.Lock()

    def __call__(self, request: ReceivedRequest) -> FakeReply:
        with self._lock:
            self._serial += 1
            serial = self._serial
        if self.on_request is not None:
            self.on_request(serial)
        text = request.prompt_text
        if not text:  # its sender was killed mid-send (the SIGKILL tests): nobody reads this answer
            return FakeReply(text="(request cut short)")
        reference = reference_of(text)
        if prompt_kinds.prompt_kind(text) == "fix":
            program = derived(reference, f"{tag_of(prompt_kinds.quoted_program(text))}+fix", self.work)
        elif serial in self.broken:
            program = broken(f"s{serial}")
        else:
            program = derived(reference, f"s{serial}", self.work)
        return FakeReply(text=f"<!-- serial {serial} -->\nHere is the program.\n\n```python\n{program}```\n")
