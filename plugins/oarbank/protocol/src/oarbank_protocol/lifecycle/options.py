"""The supervisor's knobs: what the manifest does not carry, with the fault matrix's numbers.

One frozen object, handed from an agent's command line through the module manager to every
service's supervisor and its collaborators, so a test or an agent tunes them in one place.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SupervisorOptions:
    """Knobs the manifest does not carry; defaults from the fault matrix."""

    reap_period_s: float = 60.0
    reap_budget_s: float = 30.0
    max_destroys_per_period: int = 64
    destroy_concurrency: int = 4
    liveness_timeout_s: float = 10.0
    status_failure_threshold: int = 3
    ready_not_running_grace: int = 3
    refingerprint_initial_s: float = 5.0
    refingerprint_max_s: float = 120.0
    escalation_budget_s: float | None = None
    """Total time for ``destroy --force`` after a hung stop; None = the destroy timeout (60 s)."""
    escalation_destroy_timeout_s: float = 60.0
