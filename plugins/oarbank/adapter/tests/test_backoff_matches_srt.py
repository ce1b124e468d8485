"""The protocol's restart backoff and srt's decide alike.

oarbank-protocol carries its own backoff (the library must not need srt) and srt applies
its own to ``restart:`` blocks. A protocol service run by srt's ``oarbank`` kind must back
off like any other srt service under the same numbers, so the two are held to the same
decisions here, where both are installed: same delays, same give-ups, same counters.
"""

from __future__ import annotations

import random

import pytest
from oarbank_protocol.lifecycle.restart import RestartBudget
from oarbank_protocol.manifest import RestartSpec
from srt_services.extend.backoff import RestartPolicy, RestartTracker

SPECS = [
    RestartSpec(),
    RestartSpec(backoff_initial_s=1, backoff_max_s=8, jitter=0, max_failures=100),
    RestartSpec(
        backoff_initial_s=0.5,
        backoff_max_s=30,
        jitter=0.25,
        max_failures=4,
        window_s=20,
        reset_after_s=5,
    ),
]


def srt_policy(spec: RestartSpec) -> RestartPolicy:
    """What a recipe's ``restart:`` block with the manifest's numbers plans in srt."""
    return RestartPolicy(
        policy="always",
        backoff_initial=spec.backoff_initial_s,
        backoff_max=spec.backoff_max_s,
        max_failures=spec.max_failures,
        window=spec.window_s,
        reset_after=spec.reset_after,
        jitter=spec.jitter,
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("spec", SPECS, ids=["defaults", "no-jitter", "short-window"])
def test_the_protocol_backoff_decides_as_srts(spec: RestartSpec, seed: int) -> None:
    now = [0.0]
    steps = random.Random(seed)
    ours = RestartBudget(spec, lambda: now[0], random.Random(seed))
    theirs = RestartTracker(srt_policy(spec), clock=lambda: now[0], rand=random.Random(seed).random)
    gave_up = 0
    for _ in range(300):
        now[0] += steps.uniform(0.0, 30.0)
        ran_for = 0.0
        if steps.random() < 0.5:  # it became ready, then ran a while before it failed
            began = now[0]
            ours.on_running(began)
            now[0] += steps.uniform(0.0, 2.5 * spec.reset_after)
            ran_for = now[0] - began
        decision = ours.on_failure()
        expected = theirs.on_exit(1, ran_for)
        assert decision.give_up is not expected.restart
        assert decision.delay_s == (expected.delay if expected.restart else 0.0)
        assert decision.failures_in_window == len(theirs.failures)
        assert decision.consecutive == theirs.streak
        if decision.give_up:  # an operator's reset, on both sides
            gave_up += 1
            ours.reset()
            theirs.failures.clear()
            theirs.streak = 0
    assert gave_up or spec.max_failures == 100
