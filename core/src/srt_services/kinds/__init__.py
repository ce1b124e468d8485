"""Service kinds that ship with core (only ``generic``; the rest are plugins)."""
