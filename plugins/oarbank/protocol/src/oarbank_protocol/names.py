"""One name rule for everything that ends up in a path, an argv or a label.

Service, module, probe, pool and node names are used to build data, state and log paths and
appear in labels. A single conservative rule (CNI style) keeps ``../x``, ``-rf``, NUL and
newlines out of all of them (fault matrix V03).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

NAME_MAX = 128
OBJECT_ID_MAX = 512

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_name(value: str, what: str = "name") -> str:
    """Return ``value`` if it is a safe name, else raise ``ValueError`` saying why."""
    if not value:
        raise ValueError(f"{what} must not be empty")
    if len(value) > NAME_MAX:
        raise ValueError(f"{what} is longer than {NAME_MAX} characters")
    if not _NAME_RE.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} must start with a letter or digit and contain only "
            "letters, digits, '_', '.' and '-'"
        )
    return value


def check_object_id(value: str) -> str:
    """Object ids are passed to ``destroy`` as an argv element, so they must not look like flags.

    An id such as ``--force`` would otherwise turn a polite destroy into a forced one.
    """
    if not value:
        raise ValueError("object id must not be empty")
    if len(value) > OBJECT_ID_MAX:
        raise ValueError(f"object id is longer than {OBJECT_ID_MAX} characters")
    if value.startswith("-"):
        raise ValueError(f"object id {value!r} must not start with '-'")
    if any(ch in value for ch in "\x00\n\r"):
        raise ValueError("object id must not contain NUL or line breaks")
    return value


def is_object_id(value: str) -> bool:
    try:
        check_object_id(value)
    except ValueError:
        return False
    return True


Name = Annotated[str, AfterValidator(check_name)]
ObjectId = Annotated[str, AfterValidator(check_object_id)]
