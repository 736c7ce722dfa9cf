# threat: processes (issue 26): 300 processes that each leave the session (setsid) and drop the
# marker variable (empty environment), as if to hide from policing and from the kill
# task: smoke/5
# expect: runtime_error/process_limit
# limits: max_processes=32
import os
import time

for _ in range(300):
    if os.fork() == 0:
        os.setsid()
        os.execve("/bin/sleep", ["pikeh-trusted-setsid-probe", "120"], {})
time.sleep(100)
