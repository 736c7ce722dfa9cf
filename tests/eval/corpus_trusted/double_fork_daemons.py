# threat: processes (issue 26): 40 daemons by double fork (the middle process exits at once, so
# each daemon is an orphan), each in its own session with an empty environment
# task: smoke/5
# expect: runtime_error/process_limit
# limits: max_processes=16
import os
import time

for _ in range(40):
    middle = os.fork()
    if middle == 0:
        if os.fork() == 0:
            os.setsid()
            os.execve("/bin/sleep", ["pikeh-trusted-daemon-probe", "120"], {})
        os._exit(0)
    os.waitpid(middle, 0)
time.sleep(100)
