# threat: 13 (fork bomb, bounded at 200 processes so that a broken sandbox cannot take the host down)
# task: smoke/5
# expect: runtime_error/process_limit
# limits: max_processes=16
import os
import time

children = 0
while children < 200:
    if os.fork() == 0:
        time.sleep(60)
        os._exit(0)
    children += 1
time.sleep(60)
