"""The runner's results as text, TAP 13 or JUnit XML; each line names the check's source."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from oarbank_protocol.conformance.checks import Check
from oarbank_protocol.conformance.runner import CheckResult


def passed(results: Sequence[CheckResult]) -> bool:
    return all(r.outcome != "fail" for r in results)


def _label(r: CheckResult) -> str:
    return f"{r.check.id} [{r.check.source}] {r.check.title}"


def summary(results: Sequence[CheckResult]) -> str:
    failed = [r for r in results if r.outcome == "fail"]
    skipped = sum(1 for r in results if r.outcome == "skip")
    spec = sum(1 for r in failed if r.check.source == "spec")
    return (
        f"{len(results)} checks: {len(results) - len(failed) - skipped} passed, "
        f"{len(failed)} failed ({spec} spec, {len(failed) - spec} srt schema), "
        f"{skipped} skipped"
    )


def format_text(results: Sequence[CheckResult], notes: Sequence[str] = ()) -> str:
    lines = []
    for r in results:
        note = f" — {r.message}" if r.message else ""
        lines.append(f"{r.outcome.upper():4} {_label(r)}{note}")
    lines.extend(f"note: {n}" for n in notes)
    lines.append(summary(results))
    return "\n".join(lines) + "\n"


def format_tap(results: Sequence[CheckResult], notes: Sequence[str] = ()) -> str:
    lines = ["TAP version 13", f"1..{len(results)}"]
    for number, r in enumerate(results, start=1):
        if r.outcome == "pass":
            lines.append(f"ok {number} - {_label(r)}")
        elif r.outcome == "skip":
            lines.append(f"ok {number} - {_label(r)} # SKIP {r.message}")
        else:
            lines.append(f"not ok {number} - {_label(r)}")
            lines.append("  ---")
            message = r.message.replace("\n", " ")
            lines.append(f"  message: {message!r}")
            lines.append(f"  source: {r.check.source!r}")
            lines.append("  ...")
    lines.extend(f"# {n}" for n in notes)
    lines.append(f"# {summary(results)}")
    return "\n".join(lines) + "\n"


def format_junit(results: Sequence[CheckResult]) -> str:
    suite = ET.Element(
        "testsuite",
        name="service-protocol-1 conformance",
        tests=str(len(results)),
        failures=str(sum(1 for r in results if r.outcome == "fail")),
        skipped=str(sum(1 for r in results if r.outcome == "skip")),
        errors="0",
        time=f"{sum(r.duration_s for r in results):.3f}",
    )
    for r in results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname="service-protocol-1." + r.check.source.replace(" ", "-"),
            name=f"{r.check.id} {r.check.title}",
            time=f"{r.duration_s:.3f}",
        )
        if r.outcome == "fail":
            ET.SubElement(case, "failure", message=r.message[:1000]).text = r.message
        elif r.outcome == "skip":
            ET.SubElement(case, "skipped", message=r.message)
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def format_table(checks: Sequence[Check]) -> str:
    """The checks as the Markdown table the README shows (``--list``)."""
    lines = ["| id | source | probe | check |", "| --- | --- | --- | --- |"]
    for c in checks:
        lines.append(f"| {c.id} | {c.source} | {'P' if c.probe else ''} | {c.title} |")
    return "\n".join(lines) + "\n"
