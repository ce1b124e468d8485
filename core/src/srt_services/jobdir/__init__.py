"""The job directory: where a job leaves everything a later command needs.

    plan.json      the plan being executed (exactly what dry-run --json prints)
    recipe.yaml    the recipe as given
    job.json       the Slurm submission (``srt apply`` only): job id, script, time
    events.jsonl   one JSON object per event, with monotonic and wall timestamps
    state.json     what runs where: PID, start time, state, per instance; the job's cookie
    result.json    how the job ended (written last)
    logs/          one file per step: service_<name>[...].out, <role>_<i>.out, ...
    work/<step>/   files a kind writes for an instance, and its scratch space
    src/<name>/    source checkouts

This package is the one place that knows these names and shapes. The orchestrator writes
through it, and ``srt status``, ``srt stop``, the launchers' leftover checks and the test
helpers read through it, so a field is added (or a reader hardened) once. It sits below
``launch`` and ``supervise`` and imports neither.

Modules (import them directly; this ``__init__`` stays empty so that the cheap ones, such
as :mod:`~srt_services.jobdir.identity` in a port check run through ``srun``, do not pull
in the typed readers):

* :mod:`~srt_services.jobdir.layout`: paths, atomic writes, a new job directory's name;
* :mod:`~srt_services.jobdir.identity`: the job cookie and the environment variables that
  carry it into every process;
* :mod:`~srt_services.jobdir.events`: ``events.jsonl``;
* :mod:`~srt_services.jobdir.cause`: why a job stopped (in ``state.json``, ``result.json``
  and two events);
* :mod:`~srt_services.jobdir.state`, :mod:`~srt_services.jobdir.result`: the typed
  files and their readers (``plan.json`` is read by the plan's own model,
  :class:`~srt_services.contracts.plan.Plan`);
* :mod:`~srt_services.jobdir.view`: a job directory as another process sees it.
"""
