"""How a conformance check is declared (once, with its id, title, source and prerequisites)
and how its body reports a failure or a skip.

A check is a method of the suite (:mod:`~oarbank_protocol.conformance.suite`) decorated with
:func:`check`; the decorator turns it into a :class:`Check` that carries everything the
reports need, and the suite's class body is the one table of checks (in run order).
Prerequisites name the *checks* (the decorated methods above), never an id string, so an id
is written exactly once. A body passes by returning (optionally a note), fails by raising
:class:`CheckFailed` and skips by raising :class:`CheckSkipped`.

Every check says where its rule comes from:

* ``spec``: a requirement of service protocol 1 itself (one JSON document, exit 0 means
  success, idempotency, the timeouts, the three labels, what stop means);
* ``srt schema``: a rule of srt's schemas or decisions where the spec is silent (the error
  document's shape, an owned object's ``kind``, refusing a busy destroy without ``--force``),
  so a module author knows which failures break the protocol and which only break srt's
  stricter reading of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

Source = Literal["spec", "srt schema"]
SPEC: Final[Source] = "spec"
SRT_SCHEMA: Final[Source] = "srt schema"

Body = Callable[[Any], "str | None"]


class CheckFailed(Exception):
    """The module broke the rule the check is about; the message says how."""


class CheckSkipped(Exception):
    """The check cannot be judged against this module (it owns no busy object...)."""


@dataclass(frozen=True, eq=False)
class Check:
    id: str
    title: str
    source: Source
    probe: bool
    """Also applies to probes (executables that implement only fingerprint)."""
    needs: tuple[Check, ...]
    body: Body

    def __call__(self, suite: Any) -> str | None:
        return self.body(suite)


def check(
    check_id: str,
    title: str,
    *,
    source: Source = SPEC,
    probe: bool = False,
    needs: tuple[Check, ...] = (),
) -> Callable[[Body], Check]:
    """Declare the decorated suite method as a check (see the module docstring)."""

    def declare(body: Body) -> Check:
        return Check(check_id, title, source, probe, needs, body)

    return declare


def collect(owner: type) -> tuple[Check, ...]:
    """The checks declared in ``owner``'s body, in declaration (= run) order, validated."""
    found = tuple(v for v in vars(owner).values() if isinstance(v, Check))
    seen: set[str] = set()
    for item in found:
        if item.id in seen:
            raise ValueError(f"check id {item.id} is declared twice")
        missing = [n.id for n in item.needs if n.id not in seen]
        if missing:
            raise ValueError(f"{item.id} needs {missing}, declared after it")
        seen.add(item.id)
    return found
