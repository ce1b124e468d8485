"""A job directory as a plugin command reads it (:mod:`srt_services.app.job_record`)."""

from srt_services.app.job_record import JobDirError, JobRecord, read_job

__all__ = ["JobDirError", "JobRecord", "read_job"]
