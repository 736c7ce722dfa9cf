"""The kit plugins build with: what PIKE-style strategies share (prompt templates, failure reports, code
fences, idea lists, prompt recognition, evaluation rounds) and what SDK-based LLM backends share (error
mapping). Offered to plugins through ``pike_harness.api``; the host's run loop uses ``code_fences`` too.
"""
