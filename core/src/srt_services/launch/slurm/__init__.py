"""The Slurm launcher: one named ``srun --overlap`` step per instance inside an allocation,
stopped through ``scancel --signal`` on the step (never by signalling the srun client)."""
