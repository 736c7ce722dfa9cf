"""What supervises the candidate's process: spawning, sandboxing, scheduling, the evaluation engine,
the build cache, the reference oracle and the queue worker service with its retry and liveness rules.
"""
