# threat: resources: holds host memory that no process's RSS shows: 25 memfds of 64 MB (1.6 GB),
# written with os.write and never mapped, over an 800 MB memory limit; then waits to be killed
# task: smoke/5
# expect: runtime_error/memory_limit
# limits: memory_mb=800
import os
import time

block = b"\1" * (64 << 20)
held = []
for _ in range(25):
    fd = os.memfd_create("pikeh-memfd-hold")
    written = 0
    while written < len(block):
        written += os.write(fd, memoryview(block)[written:])
    held.append(fd)
del block
time.sleep(100)
