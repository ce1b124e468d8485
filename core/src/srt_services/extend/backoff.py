"""Restart backoff: the one implementation srt's supervisor and plugins share.

A plugin that restarts something itself must not grow its own idea of "how long until the
next start, or give up": two implementations drift (jitter ranges, when a stable run resets
the doubling, how failures are counted), and a recipe author then meets two behaviours
under one set of words. So the plugin drives the tracker srt's supervisor uses for
``restart:`` blocks:

* delays double from ``backoff_initial`` up to ``backoff_max``, plus up to ``jitter`` of
  random extra (never less than the base delay);
* failures are counted within a sliding ``window``; the ``max_failures``-th one gives up
  instead of scheduling a start, so a crash loop makes exactly ``max_failures`` starts;
* a run that lasted ``reset_after`` seconds resets the doubling.

One library restarts services outside this rule: ``oarbank-protocol`` (service protocol
1's lifecycle manager) must run without srt, so it states these same semantics as the
protocol's own; srt-oarbank's tests hold its decisions to this tracker's.

The tracker is pure: the clock and the random source are injected, it does no I/O, and its
state (``failures``, ``streak``) is plain data a caller may persist and restore.

Usage::

    from srt_services.extend.backoff import RestartPolicy, RestartTracker

    policy = RestartPolicy(policy="always", backoff_initial=10, backoff_max=300,
                           max_failures=5, window=600, reset_after=600, jitter=0.25)
    tracker = RestartTracker(policy, clock=time.monotonic)
    decision = tracker.on_exit(code, ran_for)   # Decision(restart, delay, reason)
"""

from __future__ import annotations

from srt_services.contracts.plan import PlannedRestart as RestartPolicy
from srt_services.supervise.restart import Decision, RestartTracker

__all__ = ["Decision", "RestartPolicy", "RestartTracker"]
