"""Load and plan a recipe the way ``srt`` does, and run one probe check, from a plugin
(:mod:`srt_services.app.embed`)."""

from srt_services.app.embed import (
    Allocation,
    AllocationRequest,
    Planned,
    check_probe,
    load,
    plan,
    plugin_set,
)

__all__ = [
    "Allocation",
    "AllocationRequest",
    "Planned",
    "check_probe",
    "load",
    "plan",
    "plugin_set",
]
