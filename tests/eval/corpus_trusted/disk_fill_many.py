# threat: resources (issue 26): fills its scratch folder with many files, each under the file-size
# limit, then waits: the folders' total is over disk_mb
# task: smoke/5
# expect: runtime_error/disk_limit
# limits: disk_mb=16
import os
import time

block = os.urandom(1 << 20)
for index in range(64):
    with open(f"pikeh-disk-fill-{index}", "wb") as handle:
        handle.write(block)
time.sleep(100)
