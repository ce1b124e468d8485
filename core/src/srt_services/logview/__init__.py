"""``srt logs``: a job's log files read back, one or many at once, with each line prefixed
by its instance and each restart marked, and followed as they grow.

* :mod:`~srt_services.logview.sources`: which files a selection (``web``, ``prefill_0``,
  ``workers``, ``sbatch``) means;
* :mod:`~srt_services.logview.logfile`: one file read incrementally: the past (``-n``,
  ``--since``), then what is appended, across restarts, truncation and rotation;
* :mod:`~srt_services.logview.printer`: the prefixed lines;
* :mod:`~srt_services.logview.follow`: ``-f``, woken by inotify.
"""
