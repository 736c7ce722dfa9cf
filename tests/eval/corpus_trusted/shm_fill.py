# threat: resources (issue 26): fills /dev/shm and /tmp (memory-backed, invisible to the memory
# policing) until refused; how far it got is its error message (the test checks the caps held)
# task: smoke/5
# expect: compile_error/load
import os

chunk = b"\0" * (32 << 20)
reached = {}
for folder in ("/dev/shm", "/tmp"):
    written = 0
    try:
        with open(os.path.join(folder, "pikeh-fill"), "wb") as handle:
            while written < (3 << 30):
                handle.write(chunk)
                handle.flush()
                written += len(chunk)
    except OSError:
        pass
    reached[folder] = written >> 20
    os.unlink(os.path.join(folder, "pikeh-fill"))
raise RuntimeError("pikeh-shm-mb={} pikeh-tmp-mb={}".format(reached["/dev/shm"], reached["/tmp"]))
