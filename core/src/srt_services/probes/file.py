"""``file``: ready when a non-empty regular file appears (written by this attempt)."""

from __future__ import annotations

import os
import stat
from typing import Any, ClassVar

from pydantic import Field, field_validator

from srt_services.contracts.context import InstanceContext
from srt_services.contracts.probe import Probe, ProbeResult, ProbeTarget
from srt_services.probes.log import FALLBACK_POLL
from srt_services.recipe.models import StrictModel


class FileConfig(StrictModel):
    path: str = Field(
        description="File that must exist and be non-empty. Placeholders are rendered first;"
        " a relative path is inside the job directory, a file elsewhere needs an absolute"
        " path (`/...`, `{job_dir}/...`, `{local_dir}/...`)."
    )

    @field_validator("path")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


def _state(path: str, since: float) -> str | None:
    """``None`` when ready, else why not."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{path} does not exist yet"
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_size == 0:
        return f"{path} is empty"
    if st.st_mtime < since:
        return f"{path} is older than this attempt"
    return None


class FileProbe(Probe):
    name: ClassVar[str] = "file"
    summary: ClassVar[str] = "A non-empty regular file, written after the attempt started, exists."
    Config: ClassVar[type[FileConfig]] = FileConfig
    instance_scoped: ClassVar[bool] = True

    def plan(self, config: Any, ctx: InstanceContext, default_port: int | None) -> dict[str, Any]:
        return {"path": ctx.job_path(config.path)}

    def describe(self, planned: dict[str, Any]) -> str:
        return f"non-empty file {planned['path']}"

    async def check(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        why = _state(target.config["path"], target.started_wall - 0.05)
        return ProbeResult(why is None, why or "")

    async def wait_ready(self, target: ProbeTarget, attempt_timeout: float) -> None:
        path = target.config["path"]
        while True:
            why = _state(path, target.started_wall - 0.05)
            if why is None:
                return
            target.last_error = why
            await target.wait_file_event(path, FALLBACK_POLL)
