"""The srt node agent: one process per Slurm node that runs that node's instances for the
orchestrator (``python -m srt_services.launch.agent``; the orchestrator's side is
:mod:`srt_services.launch.slurm.agents`)."""
