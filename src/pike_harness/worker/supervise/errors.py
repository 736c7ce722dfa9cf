"""The worker's one error type: the evaluation machinery failed, so there is no verdict to give.

Evaluators turn it into their host's ``EvaluatorError``; it is never a candidate's category. Kept in
the worker (standard library only) so that GPU hosts and containers need nothing from the host.
"""

from __future__ import annotations


class InfrastructureError(Exception):
    """The reference failed, the device is unusable, or a worker process vanished for reasons not the candidate's."""
