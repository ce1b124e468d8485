"""Running one protocol operation: the exact environment and files, the safe executor
(timeouts, output caps, process-tree kill, strict parsing), the typed client over it, and
module bundles on disk.
"""
