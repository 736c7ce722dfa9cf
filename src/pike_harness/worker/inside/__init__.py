"""What runs inside the sandbox: the candidate's process (``child``) and everything it imports.

Only torch, triton and the standard library, plus the shared wire modules of ``pike_harness.worker``.
"""
