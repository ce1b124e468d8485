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
here-document safely (a line of it could end the document), so that is an error; so is
any value where a placeholder follows a backslash (``\\{job_dir}``: the backslash would
escape the value's opening quote) or stands in a here-document's delimiter. A here-string
(``<<<``) is not a here-document.

The text is scanned once per distinct preamble (cached); rendering an instance only joins
pieces. ``{{name}}`` is a literal ``{name}``, and ``${name}`` is the shell's, as everywhere.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
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
#: where no quoting keeps a value one word: right after a backslash (which would escape
#: the value's first character, its opening quote) or in a here-document's delimiter
UNQUOTABLE = "unquotable"
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
    return _heredoc_line(value, context)


def _heredoc_line(value: str, context: str) -> str:
    """``value`` in a here-document's body, where only a newline could end it early; or
    refused where no quoting works (``UNQUOTABLE``)."""
    if context == UNQUOTABLE:
        raise ShellValueError(
            "a placeholder right after a backslash, or in a here-document's delimiter, cannot"
            f" be given {value!r} safely (remove the backslash; use a fixed delimiter)"
        )
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
    scan = _Scanner(text)
    out: list[tuple[str, int]] = []
    want = iter(positions)
    nxt = next(want, None)
    i, n = 0, len(text)
    while i < n and nxt is not None:
        if i < nxt:
            i = scan.step(i)
            continue
        # at a placeholder, or past one the scan stepped over (the character after a
        # backslash, a here-document's delimiter)
        out.append(scan.context() if i == nxt else (UNQUOTABLE, 0))
        nxt = next(want, None)
    i = min(i, n)  # a backslash at the very end steps past it
    while nxt is not None:  # placeholders at the very end
        out.append(scan.context() if nxt >= i else (UNQUOTABLE, 0))
        nxt = next(want, None)
    return out


class _Scanner:
    """How bash would read ``text`` so far: the open quoting levels and here-documents.

    A small state machine read one character (or one escape) at a time by :meth:`step`:
    the innermost quoting level picks the reader (:data:`_READERS`), and in a plain word
    the character picks the action (:data:`_WORD_ACTIONS`); each returns where to go on.
    """

    __slots__ = ("depth", "heredoc", "kinds", "line_start", "pending", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        # the open quoting levels, innermost last, and for a ``$( ... )`` level how many
        # parentheses are open in it (a backquote level is "`")
        self.kinds: list[str] = [WORD]
        self.depth: list[int] = [0]
        #: here-documents opened on the current line, each read after it, in order:
        #: (delimiter, quoted, strip tabs)
        self.pending: list[tuple[str, bool, bool]] = []
        #: the here-document being read, if any
        self.heredoc: tuple[str, bool, bool] | None = None
        #: inside a here-document: whether the next character starts a line
        self.line_start = True

    def context(self) -> tuple[str, int]:
        """The context a placeholder at the current position stands in."""
        quotes = self.kinds.count("`")
        if self.heredoc is not None:
            return (HEREDOC_RAW if self.heredoc[1] else HEREDOC), quotes
        return (WORD if self.kinds[-1] == "`" else self.kinds[-1]), quotes

    def step(self, i: int) -> int:
        """Read what starts at offset ``i``; return the offset to read next."""
        if self.heredoc is not None:
            return self._in_heredoc(i, self.heredoc)
        return _READERS.get(self.kinds[-1], _Scanner._in_word)(self, i, self.text[i])

    def _push(self, kind: str, parens: int = 0) -> None:
        self.kinds.append(kind)
        self.depth.append(parens)

    def _pop(self) -> None:
        if len(self.kinds) > 1:
            self.kinds.pop()
            self.depth.pop()

    def _line_ends(self) -> None:
        """The first here-document opened on the line that ends starts on the next."""
        if self.pending:
            self.heredoc = self.pending.pop(0)
            self.line_start = True

    def _in_heredoc(self, i: int, heredoc: tuple[str, bool, bool]) -> int:
        """A line equal to the delimiter ends the here-document (the next one pending
        starts after it); nothing else in it is special."""
        text = self.text
        if self.line_start:
            end = text.find("\n", i)
            line = text[i : end if end >= 0 else len(text)]
            delimiter, _quoted, strip_tabs = heredoc
            if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                self.heredoc = self.pending.pop(0) if self.pending else None
                return end + 1 if end >= 0 else len(text)
        self.line_start = text[i] == "\n"
        return i + 1

    def _in_single(self, i: int, ch: str) -> int:
        if ch == "'":
            self._pop()
        return i + 1

    def _in_ansi(self, i: int, ch: str) -> int:
        if ch == "\\":
            return i + 2
        if ch == "'":
            self._pop()
        return i + 1

    def _in_comment(self, i: int, ch: str) -> int:
        if ch == "\n":
            self._pop()
            self._line_ends()
        return i + 1

    def _in_double(self, i: int, ch: str) -> int:
        if ch == "\\":
            return i + 2
        if ch == '"':
            self._pop()
        elif ch == "`":
            self._push("`")
        elif self.text.startswith("$(", i):
            self._push(WORD, 1)
            return i + 2
        return i + 1

    def _in_word(self, i: int, ch: str) -> int:
        """A plain word, inside ``$( )`` or backquotes too."""
        action = _WORD_ACTIONS.get(ch)
        return i + 1 if action is None else action(self, i)

    # actions in a plain word, each for the character at ``i``

    def _escape(self, i: int) -> int:
        return i + 2

    def _single_quote(self, i: int) -> int:
        self._push(SINGLE)
        return i + 1

    def _double_quote(self, i: int) -> int:
        self._push(DOUBLE)
        return i + 1

    def _dollar(self, i: int) -> int:
        after = self.text[i + 1 : i + 2]
        if after == "'":
            self._push(ANSI)
            return i + 2
        if after == "(":
            self._push(WORD, 1)
            return i + 2
        return i + 1

    def _backquote(self, i: int) -> int:
        if self.kinds[-1] == "`":
            self._pop()
        else:
            self._push("`")
        return i + 1

    def _open_paren(self, i: int) -> int:
        if self.depth[-1] > 0:
            self.depth[-1] += 1
        return i + 1

    def _close_paren(self, i: int) -> int:
        if self.depth[-1] > 0:
            self.depth[-1] -= 1
            if self.depth[-1] == 0:
                self._pop()
        return i + 1

    def _hash(self, i: int) -> int:
        if i == 0 or self.text[i - 1] in _WORD_BREAK:
            self._push(COMMENT)
        return i + 1

    def _less(self, i: int) -> int:
        if self.text.startswith("<<<", i):
            return i + 3  # a here-string: the word after it is an ordinary word
        if self.text.startswith("<<", i):
            return _heredoc_start(self.text, i, self.pending)
        return i + 1

    def _newline(self, i: int) -> int:
        self._line_ends()
        return i + 1


#: the reader of each quoting level (any other, a plain word or backquotes: ``_in_word``)
_READERS: dict[str, Callable[[_Scanner, int, str], int]] = {
    SINGLE: _Scanner._in_single,
    ANSI: _Scanner._in_ansi,
    COMMENT: _Scanner._in_comment,
    DOUBLE: _Scanner._in_double,
}
#: what a character does in a plain word (any other: nothing)
_WORD_ACTIONS: dict[str, Callable[[_Scanner, int], int]] = {
    "\\": _Scanner._escape,
    "'": _Scanner._single_quote,
    '"': _Scanner._double_quote,
    "$": _Scanner._dollar,
    "`": _Scanner._backquote,
    "(": _Scanner._open_paren,
    ")": _Scanner._close_paren,
    "#": _Scanner._hash,
    "<": _Scanner._less,
    "\n": _Scanner._newline,
}


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
