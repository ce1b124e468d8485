"""Keep secrets out of error messages and logs (fault matrix V06).

Modules get their settings in a file, so secrets never travel in argv or the environment; but
a failing op may echo a setting back on stderr or in its error document, and those texts end
up in srt's logs. Every text the executor puts into an exception passes through a
:class:`Redactor` built from the settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

MASK: Final = "***"
MIN_SECRET_LEN: Final = 4

SECRET_KEY_RE: Final = re.compile(
    r"(?i)(secret|token|passw|pwd|api[_-]?key|private[_-]?key|credential|auth|cookie|"
    r"access[_-]?key|signature)"
)


def _leaves(value: Any) -> Iterable[str]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, str | int | float):
        yield str(value)


def secret_values(settings: Mapping[str, Any], extra_keys: Iterable[str] = ()) -> set[str]:
    """Values under keys that look secret (or are listed in ``extra_keys``), at any depth."""
    wanted = {k.lower() for k in extra_keys}
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and (SECRET_KEY_RE.search(key) or key.lower() in wanted):
                    found.update(_leaves(item))
                else:
                    walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(settings)
    return found


class Redactor:
    """Replaces every known secret value with ``***``.

    Values shorter than four characters are ignored: masking ``"1"`` or ``"on"`` everywhere
    would destroy messages without protecting anything worth protecting.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        values = sorted({s for s in secrets if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in values)) if values else None

    @classmethod
    def from_settings(
        cls,
        settings: Mapping[str, Any],
        *,
        extra_keys: Iterable[str] = (),
        extra_values: Iterable[str] = (),
    ) -> Redactor:
        return cls([*secret_values(settings, extra_keys), *extra_values])

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    def redact_json(self, value: Any) -> Any:
        """Redact every string inside a JSON-like value (error document ``details``)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, Mapping):
            return {k: self.redact_json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact_json(v) for v in value]
        return value
