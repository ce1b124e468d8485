"""``log``: ready when a line written by *this* attempt matches a regular expression.

The file is followed from the offset the attempt started at (so a ready line left by an
earlier attempt never counts) and read incrementally when inotify says it changed; nothing
is ever re-read. A truncated or replaced file is followed from its start. A line longer than
``MAX_LINE`` is matched on its first ``MAX_LINE`` bytes, so memory stays bounded.
"""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar

from pydantic import Field, field_validator

from srt_services.extend.context import InstanceContext
from srt_services.extend.probe import Probe, ProbeResult, ProbeTarget
from srt_services.recipe.models import StrictModel

MAX_LINE = 64 * 1024
READ_CHUNK = 1 << 20
#: Re-check this often even without an inotify event (logs on a network filesystem).
FALLBACK_POLL = 1.0


class LogConfig(StrictModel):
    pattern: str = Field(description="Regular expression searched in each new log line.")
    path: str | None = Field(
        None,
        description="File to follow instead of the instance's own log (relative to the job"
        " directory; placeholders allowed).",
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"is not a valid regular expression: {exc}") from None
        return value


class LineScanner:
    """Incremental reader of one file from an offset, matching complete and partial lines."""

    def __init__(self, path: str, offset: int, pattern: str) -> None:
        self.path = path
        self.offset = offset
        self.regex = re.compile(pattern.encode(errors="surrogateescape"))
        self.pending = b""
        self.inode: int | None = None
        self.matched: bytes | None = None

    def poll(self) -> bool | None:
        """Read what is new; ``True`` on a match, ``None`` while the file does not exist."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            st = os.fstat(fd)
            if self.inode is not None and st.st_ino != self.inode:
                self._restart()  # replaced (rotation): the new file starts at 0
            self.inode = st.st_ino
            if st.st_size < self.offset:
                self._restart()  # truncated
            while self.offset < st.st_size:
                data = os.pread(fd, min(READ_CHUNK, st.st_size - self.offset), self.offset)
                if not data:
                    break
                self.offset += len(data)
                if self._feed(data):
                    return True
        finally:
            os.close(fd)
        return False

    def _restart(self) -> None:
        self.offset = 0
        self.pending = b""

    def _feed(self, data: bytes) -> bool:
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            self._append(data[start:nl])
            line, self.pending = self.pending, b""
            start = nl + 1
            if self.regex.search(line):
                self.matched = line
                return True
        self._append(data[start:])
        if self.pending and self.regex.search(self.pending):
            # a ready line flushed without its newline still counts
            self.matched = self.pending
            return True
        return False

    def _append(self, chunk: bytes) -> None:
        room = MAX_LINE - len(self.pending)
        if room > 0 and chunk:
            self.pending += chunk[:room]


class LogProbe(Probe):
    name: ClassVar[str] = "log"
    summary: ClassVar[str] = (
        "A line written by this attempt matches `pattern` (inotify, no polling)."
    )
    Config: ClassVar[type[LogConfig]] = LogConfig
    instance_scoped: ClassVar[bool] = True

    def plan(self, config: Any, ctx: InstanceContext, default_port: int | None) -> dict[str, Any]:
        path = config.path
        if path is not None and not path.startswith("/"):
            path = f"{ctx.paths.job_dir}/{path}"
        return {"pattern": config.pattern, "path": path}

    def describe(self, planned: dict[str, Any]) -> str:
        where = f" in {planned['path']}" if planned.get("path") else ""
        return f"log matches /{planned['pattern']}/{where}"

    def _scanner(self, target: ProbeTarget) -> LineScanner:
        cfg = target.config
        path = cfg.get("path") or target.log_path
        offset = target.log_offset if path == target.log_path else 0
        return LineScanner(path, offset, cfg["pattern"])

    async def check(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        scanner = self._scanner(target)
        found = scanner.poll()
        if found is None:
            return ProbeResult(False, f"log file {scanner.path} never created")
        return ProbeResult(bool(found), "" if found else "pattern not seen yet")

    async def wait_ready(self, target: ProbeTarget, attempt_timeout: float) -> None:
        scanner = self._scanner(target)
        while True:
            found = scanner.poll()
            if found:
                return
            if found is None:
                target.last_error = f"log file {scanner.path} never created"
            else:
                target.last_error = f"no line matching /{target.config['pattern']}/ yet"
            await target.wait_file_event(scanner.path, FALLBACK_POLL)
