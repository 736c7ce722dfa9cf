"""The eval worker: loads, checks and times one candidate in a process of its own.

This package is the one part of pike-harness that runs on GPU hosts and in containers, so it imports
only torch, triton (when present) and the standard library (plus click for the worker service's
options). Nothing here may import rich, duckdb or any plugin.

- ``inside/``: what runs in the candidate's sandboxed process (``python -m pike_harness.worker.inside.child``).
- ``supervise/``: what starts, watches, schedules and judges that process, up to the evaluation engine
  and the queue worker service.
- here, shared by both sides and by every transport: the wire records (``records``), the pipe channel
  between supervisor and child (``channel``), the folder channel between evaluators and workers
  (``queue_channel``, ``queue_client``) and the host facts recorded with every result (``environment``).
"""
