"""``log``: ready when a line written by *this* attempt matches a regular expression.

The file is followed from where the attempt began (so a ready line left by an earlier
attempt never counts): the instance's own log from the offset its launch recorded, a
``path:`` from the size and inode that file had when the attempt was launched. It is read
incrementally when inotify says it changed; nothing is ever re-read. A truncated or replaced
file (rotation) is followed from its start.

Matching never holds up the event loop, whatever the pattern and the output:

* ``\\r`` ends a line like ``\\n`` does: a progress bar that rewrites one terminal line
  64 KB long is so many short lines, each matched once, not one long line matched again
  and again as it grows;
* a line longer than ``MAX_LINE`` is matched on its first ``MAX_LINE`` bytes (memory stays
  bounded whatever a service writes without a newline);
* every search runs with a deadline (``MATCH_TIMEOUT``, the ``regex`` engine's own
  timeout): a pattern that backtracks catastrophically on some line gives up on that line
  and says so in the probe's last error, instead of hanging the orchestrator;
* one poll reads at most ``POLL_BYTES``; a probe that is behind (a 50 MB log) yields to the
  loop between polls, so signals and the probe's own timeout are always served.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, field_validator

from srt_services.contracts.context import InstanceContext
from srt_services.contracts.probe import Probe, ProbeResult, ProbeTarget
from srt_services.recipe.models import StrictModel

if TYPE_CHECKING:
    import regex

MAX_LINE = 64 * 1024
READ_CHUNK = 1 << 20
#: What one poll reads before it gives the event loop a turn.
POLL_BYTES = 4 << 20
#: Longest one search of one line may take (seconds).
MATCH_TIMEOUT = 0.05
#: Re-check this often even without an inotify event (logs on a network filesystem).
FALLBACK_POLL = 1.0
#: Line ends: a fixed class, which the standard engine finds as fast (``regex``, some 15 ms
#: to import, loads with the first pattern: every ``srt run`` registers this probe).
_ENDS = re.compile(rb"[\r\n]")


def compile_pattern(pattern: str) -> regex.Pattern[bytes]:
    """The pattern as the probe runs it: bytes (a log need not be UTF-8), ``regex`` syntax
    (a superset of ``re``'s), so that the check at load time and the run agree."""
    import regex

    return regex.compile(pattern.encode(errors="surrogateescape"))


class LogConfig(StrictModel):
    pattern: str = Field(
        description="Regular expression searched in each new log line (`\\r` and `\\n` end"
        " a line; each search is bounded in time)."
    )
    path: str | None = Field(
        None,
        description="File to follow instead of the instance's own log. Placeholders are"
        " rendered first; a relative path is inside the job directory, a file elsewhere"
        " needs an absolute path (`/...`, `{job_dir}/...`, `{local_dir}/...`).",
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        import regex

        try:
            compile_pattern(value)
        except regex.error as exc:
            raise ValueError(f"is not a valid regular expression: {exc}") from None
        return value


class LineScanner:
    """Incremental reader of one file from an offset, matching complete and partial lines.

    ``inode`` is the file's identity when the offset was taken (``None``: unknown, the
    first file seen is the one): another file at ``path`` later is read from its start.
    """

    def __init__(self, path: str, offset: int, pattern: str, inode: int | None = None) -> None:
        self.path = path
        self.offset = offset
        self.regex = compile_pattern(pattern)
        self.pending = b""
        self.inode = inode
        self.matched: bytes | None = None
        #: more was written than one poll reads: poll again before waiting
        self.behind = False
        #: set when a search gave up on a line (the pattern backtracks too much)
        self.slow: str | None = None

    def poll(self) -> bool | None:
        """Read what is new; ``True`` on a match, ``None`` while the file does not exist."""
        from srt_services.safefile import UnsafeFile, open_file

        try:
            # a FIFO or a device put where the log goes is not waited on (it would stall
            # the orchestrator's loop): it reads as a file that is not there yet
            fd = open_file(self.path)
        except (OSError, UnsafeFile):
            return None
        self.behind = False
        try:
            st = os.fstat(fd)
            if self.inode is not None and st.st_ino != self.inode:
                self._restart()  # replaced (rotation): the new file starts at 0
            self.inode = st.st_ino
            if st.st_size < self.offset:
                self._restart()  # truncated
            budget = POLL_BYTES
            while self.offset < st.st_size:
                if budget <= 0:
                    self.behind = True
                    break
                want = min(READ_CHUNK, st.st_size - self.offset)
                data = os.pread(fd, want, self.offset)
                if not data:
                    break
                self.offset += len(data)
                budget -= len(data)
                if self._feed(data):
                    return True
        finally:
            os.close(fd)
        return False

    def _restart(self) -> None:
        self.offset = 0
        self.pending = b""

    def _search(self, line: bytes) -> bool:
        try:
            return self.regex.search(line, timeout=MATCH_TIMEOUT) is not None
        except TimeoutError:
            self.slow = (
                f"the pattern gave up on a line of {len(line)} bytes after"
                f" {MATCH_TIMEOUT * 1000:g} ms (it backtracks too much; simplify it)"
            )
            return False

    def _feed(self, data: bytes) -> bool:
        start = 0
        for end in _ENDS.finditer(data):
            at = end.start()
            self._append(data[start:at])
            line, self.pending = self.pending, b""
            start = at + 1
            if self._search(line):
                self.matched = line
                return True
        self._append(data[start:])
        if self.pending and start < len(data) and self._search(self.pending):
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
        path = ctx.job_path(config.path) if config.path is not None else None
        return {"pattern": config.pattern, "path": path}

    def describe(self, planned: dict[str, Any]) -> str:
        where = f" in {planned['path']}" if planned.get("path") else ""
        return f"log matches /{planned['pattern']}/{where}"

    def _scanner(self, target: ProbeTarget) -> LineScanner:
        cfg = target.config
        path = cfg.get("path") or target.log_path
        if path == target.log_path:
            return LineScanner(path, target.log_offset, cfg["pattern"])
        inode, offset = target.start_of(path)
        return LineScanner(path, offset, cfg["pattern"], inode)

    def _why_not(self, scanner: LineScanner, found: bool | None, pattern: str) -> str:
        if found is None:
            return f"log file {scanner.path} never created"
        if scanner.slow:
            return scanner.slow
        return f"no line matching /{pattern}/ yet"

    async def check(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        scanner = self._scanner(target)
        found = scanner.poll()
        while found is False and scanner.behind:
            await asyncio.sleep(0)
            found = scanner.poll()
        if found:
            return ProbeResult(True)
        if found is None:
            return ProbeResult(False, f"log file {scanner.path} never created")
        return ProbeResult(False, scanner.slow or "pattern not seen yet")

    async def wait_ready(self, target: ProbeTarget, attempt_timeout: float) -> None:
        scanner = self._scanner(target)
        while True:
            found = scanner.poll()
            if found:
                return
            target.last_error = self._why_not(scanner, found, target.config["pattern"])
            if scanner.behind:
                await asyncio.sleep(0)  # more to read: let the loop breathe, then go on
                continue
            await target.wait_file_event(scanner.path, FALLBACK_POLL)
