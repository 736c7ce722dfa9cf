# threat: resources (issue 26): opens files until the kernel refuses; the count it reached is its
# error message (the test checks it stopped at the per-process cap)
# task: smoke/5
# expect: compile_error/load
import os

held = []
try:
    while len(held) < 1_000_000:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError as exc:
    raise RuntimeError(f"pikeh-fd-count={len(held)} ({exc.strerror})") from None
raise RuntimeError(f"pikeh-fd-count={len(held)} (never refused)")
