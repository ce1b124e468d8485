"""Numbers from outside (command lines, control requests) that must be finite.

``float("nan")`` and ``float("inf")`` parse, and a NaN compares false with every bound, so a
check such as ``value <= 0`` lets it through: a ``nan`` timeout never fires and a ``nan`` GB
reserve poisons every sum after it. Every number the agent and its tools take in goes
through here.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from oarbank_protocol.manifest import OPS


def is_finite_number(value: Any) -> bool:
    """A real int or float (not a bool), finite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def seconds_arg(value: str) -> float:
    """argparse type: a finite number of seconds, > 0."""
    return _number_arg(value, positive=True)


def op_timeout_arg(value: str) -> tuple[str, float]:
    """argparse type: ``OP=SECONDS``, a per-operation timeout override (``--timeout``)."""
    op, sep, seconds = value.partition("=")
    if not sep or op not in OPS:
        raise argparse.ArgumentTypeError(f"expected OP=SECONDS with OP one of {', '.join(OPS)}")
    return op, seconds_arg(seconds)


def amount_arg(value: str) -> float:
    """argparse type: a finite amount, >= 0."""
    return _number_arg(value, positive=False)


def _number_arg(value: str, positive: bool) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"{value!r} is not a finite number")
    if number < 0 or (positive and number == 0):
        raise argparse.ArgumentTypeError(f"must be {'> 0' if positive else '>= 0'}")
    return number


def refuse_constant(name: str) -> float:
    """``json.loads(..., parse_constant=refuse_constant)``: NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not a number JSON allows")
