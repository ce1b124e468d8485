"""The application layer: one module per use case of the ``srt`` command line.

Each takes a typed request and returns a typed result; the CLI parses arguments into the
request and renders the result, and nothing below this package knows a use case. The
composition root (:mod:`.compose`) settles once, at the top, what every use case shares:
the site config, the plugin set, the recipe directory, the launcher. So the recipe, the
plan and the job directory travel one way: load (recipe), plan (plan), then supervise
(plan, job directory, launcher).

=====================  ===========================================================
module                 use case
=====================  ===========================================================
:mod:`.compose`        the composition root: site, plugins, load, plan
:mod:`.validate`       ``srt validate``: the verdict on a recipe
:mod:`.dry_run`        ``srt dry-run``: the plan, and the srun line of each instance
:mod:`.run`            ``srt run``: a job supervised to its end on this machine
:mod:`.apply`          ``srt apply`` / ``srt render``: stage, pin, render, submit
:mod:`.status`         ``srt status``: a job's instances
:mod:`.jobs`           ``srt ps``: the jobs under a job root
:mod:`.stop`           ``srt stop JOBDIR``: stop a job, or clean up after a dead one
:mod:`.control`        ``srt restart`` / ``srt stop JOBDIR SERVICE``: one service
:mod:`.embed`          for plugins that drive srt: load and plan, one probe check
:mod:`.job_record`     a job directory as plugins read it
=====================  ===========================================================
"""
