# threat: resources (issue 26): 400 threads in one process (threads are pids: a bomb of them would
# exhaust the host's pid space, which the process count alone never sees)
# task: smoke/5
# expect: runtime_error/thread_limit
# limits: max_threads=64
import threading
import time

for _ in range(400):
    threading.Thread(target=time.sleep, args=(100,), daemon=True).start()
time.sleep(100)
