"""The job's node-local tree on a Slurm node, and the one rule for removing it."""

from __future__ import annotations

import os


def own_tree(root: str, job_id: str) -> bool:
    """Whether ``root`` is job ``job_id``'s node-local tree, ``<root>/srt-<job id>`` as
    ``JobPaths.local_job_dir`` names it for a Slurm job: the clean-up removes nothing whose
    name does not say it belongs to this job."""
    return "/" in root and os.path.basename(root) == f"srt-{job_id}"
