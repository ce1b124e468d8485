"""A problem found after an earlier one was located still gets its own line: the mark
finder's second pass must not lose the ancestors the first pass asked for."""

from __future__ import annotations

from srt_services.recipe.source import parse_text

TEXT = (
    "schema: 2\nname: t\nservices:\n- name: a\n  command: [a]\n"
    "- name: b\n  command: [b]\n  readiness: {port: 9000}\n"
)


def test_the_root_then_a_deep_path() -> None:
    doc = parse_text(TEXT, "recipe.yaml")
    assert doc.mark_of(()) == (1, 1)
    assert doc.mark_of(("services", 1, "readiness")) == (8, 3)


def test_a_deep_path_then_a_sibling() -> None:
    doc = parse_text(TEXT, "recipe.yaml")
    assert doc.mark_of(("services", 1, "readiness")) == (8, 3)
    assert doc.mark_of(("services", 0, "command")) == (5, 3)
    assert doc.mark_of(("name",)) == (2, 1)
