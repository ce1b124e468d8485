"""The launch layer: planned instances to running processes (local or Slurm steps)."""
