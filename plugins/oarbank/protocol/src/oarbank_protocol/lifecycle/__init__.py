"""Keeping services alive on one node.

:class:`~oarbank_protocol.lifecycle.manager.ModuleManager` is one module on one node
(admission with pools and host memory, on_demand refcounts, yields, doctor runs);
:class:`~oarbank_protocol.lifecycle.supervisor.ServiceSupervisor` is one service's state
machine, with one module per thing it does to the service: ``readiness`` (waiting for
``ready``), ``liveness`` (``status`` while ready), ``restart`` and ``backoff`` (what a
failure leads to), ``fingerprints`` (health, and when to ask again), ``adoption`` (after an
agent restart), ``stopping`` (checked, escalated stops), ``owned_objects`` (reaping, the
teardown check), ``service_resources`` (its memory reservation and pool tokens) and
``service_record`` (its entry in the state file). Around them: ``states`` and ``options``
(the shared vocabulary and knobs), ``probes``, ``thresholds``, ``reaper`` (the reaping
decisions), ``resources`` (the node's ledger), ``state_store``, ``events`` and an
injectable ``clock``.
"""
