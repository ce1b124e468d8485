"""The srt node agent: one process per Slurm node that runs that node's instances for the
orchestrator (``python -m srt_services.launch.agent``; the orchestrator's side is
:mod:`srt_services.launch.slurm.agents`)."""

from __future__ import annotations

import os

#: How long (seconds) the agent waits after a launch before loading the rest of its
#: machinery (``__main__.SETTLE`` by default).
SETTLE_VAR = "SRT_AGENT_SETTLE"

#: Job-level Slurm variables an instance gets from the agent, as a step of its own would
#: (the agent's step-level ones, SLURM_STEP_ID, SLURM_PROCID..., describe the agent's step).
JOB_VARS = (
    "SLURM_JOB_ID",
    "SLURM_JOBID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_NODELIST",
    "SLURM_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NNODES",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_ACCOUNT",
    "SLURM_JOB_UID",
    "SLURM_JOB_USER",
    "SLURM_CLUSTER_NAME",
    "SLURMD_NODENAME",
    "SLURM_TOPOLOGY_ADDR",
    "SLURM_CONF",
    "SLURM_TMPDIR",
)


def job_vars(source: dict[str, str] | None = None) -> dict[str, str]:
    """The job-level Slurm variables of ``source`` (the agent's environment)."""
    src = dict(os.environ) if source is None else source
    return {k: src[k] for k in JOB_VARS if k in src}
