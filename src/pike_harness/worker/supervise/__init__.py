"""What supervises the candidate's process: spawning, sandboxing, static checks, output comparison,
scheduling, the build cache, the reference oracle, the evaluation engine, and the queue worker service
with its retry and liveness rules.
"""
