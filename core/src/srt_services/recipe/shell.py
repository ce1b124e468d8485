"""Placeholders rendered into bash source (a ``preamble``): each value stays one word.

A preamble is bash, and a placeholder's value is data: a job directory named
``/scratch/my jobs/$(reboot)`` must reach the preamble as that path, never as two words or
a command. So a placeholder is quoted for the place it stands in the text:

=====================  ==========================================  ===========================
where                  example                                     the value is written as
=====================  ==========================================  ===========================
plain word             ``cd {job_dir}``, ``X={node_ip}``           ``shlex.quote`` (``'...'``)
double quotes          ``"{job_dir}/x"``, ``"$(cat {work_dir}/f)"`` ``\\`` before ``\\ " $ ```
single quotes          ``'{job_dir}'``                             ``'`` as ``'\\''``
``$'...'``             ``$'{job_name}\\n'``                          ``\\`` before ``\\`` and ``'``
a comment              ``# in {job_dir}``                          newlines as spaces
a here-document        ``cat <<EOF`` ... ``{job_dir}`` ... ``EOF``  ``\\`` before ``\\ $ ```
=====================  ==========================================  ===========================

A command substitution ``$(...)`` or a backquote starts a fresh quoting level (inside
double quotes too), as bash has it. A value with a newline cannot be put in a
here-document safely (a line of it could end the document), so that is an error.

The text is scanned once per distinct preamble (cached); rendering an instance only joins
pieces. ``{{name}}`` is a literal ``{name}``, and ``${name}`` is the shell's, as everywhere.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from functools import lru_cache

from srt_services.recipe.placeholders import PLACEHOLDER_RE, UnknownPlaceholder

# quoting contexts
WORD, DOUBLE, SINGLE, ANSI, COMMENT, HEREDOC, HEREDOC_RAW = (
    "word",
    "double",
    "single",
    "ansi",
    "comment",
    "heredoc",
    "heredoc-raw",
)
#: characters after which a ``#`` starts a comment (bash: at the start of a word)
_WORD_BREAK = " \t\n;&|()<>"


class ShellValueError(ValueError):
    """A value that cannot be written safely where its placeholder stands."""


def quote_for(value: str, context: str) -> str:
    """``value`` written so that bash reads it back unchanged, as one word, in ``context``."""
    if context == WORD:
        return shlex.quote(value)
    if context == DOUBLE:
        for ch in ("\\", '"', "$", "`"):
            value = value.replace(ch, "\\" + ch)
        return value
    if context == SINGLE:
        return value.replace("'", "'\\''")
    if context == ANSI:
        return value.replace("\\", "\\\\").replace("'", "\\'")
    if context == COMMENT:
        return value.replace("\r", " ").replace("\n", " ")
    if "\n" in value:
        raise ShellValueError(
            f"{value!r} holds a newline, which cannot be put inside a here-document safely"
        )
    if context == HEREDOC:
        for ch in ("\\", "$", "`"):
            value = value.replace(ch, "\\" + ch)
    return value


def contexts(text: str, positions: list[int]) -> list[tuple[str, int]]:
    """The quoting context at each of ``positions`` (sorted offsets into ``text``), and
    how many backquote substitutions enclose it."""
    out: list[tuple[str, int]] = []
    want = iter(positions)
    nxt = next(want, None)
    # the open quoting levels, innermost last, and for a ``$( ... )`` level how many
    # parentheses are open in it (a backquote level is "`")
    kinds: list[str] = [WORD]
    depth: list[int] = [0]
    heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, quoted, strip tabs)
    heredoc: tuple[str, bool, bool] | None = None
    i, n = 0, len(text)
    line_start = True

    def here() -> tuple[str, int]:
        quotes = kinds.count("`")
        if heredoc is not None:
            return (HEREDOC_RAW if heredoc[1] else HEREDOC), quotes
        return (WORD if kinds[-1] == "`" else kinds[-1]), quotes

    def push(kind: str, parens: int = 0) -> None:
        kinds.append(kind)
        depth.append(parens)

    def pop() -> None:
        if len(kinds) > 1:
            kinds.pop()
            depth.pop()

    while i < n and nxt is not None:
        if i == nxt:
            out.append(here())
            nxt = next(want, None)
            continue
        ch = text[i]
        if heredoc is not None:
            # inside a here-document: a line equal to the delimiter ends it
            if line_start:
                end = text.find("\n", i)
                line = text[i : end if end >= 0 else n]
                if (line.lstrip("\t") if heredoc[2] else line) == heredoc[0]:
                    heredoc = heredocs.pop(0) if heredocs else None
                    i = end + 1 if end >= 0 else n
                    continue
            line_start = ch == "\n"
            i += 1
            continue
        kind = kinds[-1]
        if kind == SINGLE:
            if ch == "'":
                pop()
        elif kind == ANSI:
            if ch == "\\":
                i += 1
            elif ch == "'":
                pop()
        elif kind == COMMENT:
            if ch == "\n":
                pop()
                if heredocs:
                    heredoc = heredocs.pop(0)
        elif kind == DOUBLE:
            if ch == "\\":
                i += 1
            elif ch == '"':
                pop()
            elif ch == "`":
                push("`")
            elif text.startswith("$(", i):
                push(WORD, 1)
                i += 1
        elif ch == "\\":  # a plain word, inside $( ) or backquotes too
            i += 1
        elif ch == "'":
            push(SINGLE)
        elif ch == '"':
            push(DOUBLE)
        elif text.startswith("$'", i):
            push(ANSI)
            i += 1
        elif ch == "`":
            if kind == "`":
                pop()
            else:
                push("`")
        elif text.startswith("$(", i):
            push(WORD, 1)
            i += 1
        elif ch == "(" and depth[-1] > 0:
            depth[-1] += 1
        elif ch == ")" and depth[-1] > 0:
            depth[-1] -= 1
            if depth[-1] == 0:
                pop()
        elif ch == "#" and (i == 0 or text[i - 1] in _WORD_BREAK):
            push(COMMENT)
        elif text.startswith("<<", i) and not text.startswith("<<<", i):
            i = _heredoc_start(text, i, heredocs)
            continue
        elif ch == "\n" and heredocs:
            heredoc = heredocs.pop(0)
        line_start = ch == "\n"
        i += 1
    while nxt is not None:  # placeholders at the very end
        out.append(here())
        nxt = next(want, None)
    return out


def _heredoc_start(text: str, i: int, pending: list[tuple[str, bool, bool]]) -> int:
    """Note the here-document that ``<<`` at ``i`` opens; return where to go on scanning."""
    j = i + 2
    strip = j < len(text) and text[j] == "-"
    if strip:
        j += 1
    while j < len(text) and text[j] in " \t":
        j += 1
    start = j
    while j < len(text) and text[j] not in _WORD_BREAK:
        j += 1
    word = text[start:j]
    quoted = any(q in word for q in ("'", '"', "\\"))
    delimiter = word.replace("'", "").replace('"', "").replace("\\", "")
    if delimiter:
        pending.append((delimiter, quoted, strip))
    return j


def _in_backquotes(quoted: str, levels: int) -> str:
    """``quoted`` as it must be written inside ``levels`` backquote substitutions: bash
    removes one backslash before ``\\``, ``$`` and ````` at each level before it parses
    the inner command."""
    for _ in range(levels):
        quoted = quoted.replace("\\", "\\\\").replace("`", "\\`").replace("$", "\\$")
    return quoted


@lru_cache(maxsize=4096)
def _pieces(text: str) -> tuple[tuple[str, str | None, tuple[str, int]], ...]:
    """``text`` as (literal, placeholder name or None, context) pieces, scanned once."""
    matches = list(PLACEHOLDER_RE.finditer(text))
    where = contexts(text, [m.start() for m in matches if m.group(2) is not None])
    found = iter(where)
    out: list[tuple[str, str | None, tuple[str, int]]] = []
    last = 0
    for m in matches:
        literal = text[last : m.start()]
        last = m.end()
        if m.group(1) is not None:  # {{name}} -> a literal {name}
            out.append((literal + "{" + m.group(1) + "}", None, (WORD, 0)))
        else:
            out.append((literal, m.group(2), next(found)))
    out.append((text[last:], None, (WORD, 0)))
    return tuple(out)


def render_shell(text: str, values: Mapping[str, str]) -> str:
    """Substitute the placeholders of bash source ``text``, each value quoted for where it
    stands; :class:`UnknownPlaceholder` for a name not in ``values``."""
    if "{" not in text:
        return text
    parts: list[str] = []
    for literal, name, context in _pieces(text):
        parts.append(literal)
        if name is not None:
            try:
                value = values[name]
            except KeyError:
                raise UnknownPlaceholder(name) from None
            quoted = quote_for(value, context[0])
            parts.append(_in_backquotes(quoted, context[1]) if context[1] else quoted)
    return "".join(parts)
