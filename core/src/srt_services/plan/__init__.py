"""The resolve layer: a validated recipe plus an allocation to a pure, JSON-serialisable Plan."""
