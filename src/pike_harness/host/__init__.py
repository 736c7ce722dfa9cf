"""The host machinery: the plugin manager, the run loop and what feeds it (configuration, signals,
launch), the run store and its database, progress, the LLM client, prices, task loading and the audit.
"""
