"""The supervise layer: phases, readiness, crash handling, restarts and teardown."""
