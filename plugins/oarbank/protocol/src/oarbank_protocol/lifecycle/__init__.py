"""Keeping services alive on one node: the per-service state machine (restarts, adoption,
stop escalation), the per-module :class:`~oarbank_protocol.lifecycle.manager.ModuleManager`
(admission with pools and host memory, on_demand refcounts, yields), probes, reaping, the
persisted state and an injectable clock.
"""
