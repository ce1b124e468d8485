"""Readiness (and liveness) blocks: exactly one probe, each probe's own rules, timings.

Every recipe here has one service whose ``readiness:`` key is on line 7, column 3.
"""

from __future__ import annotations

import textwrap

import pytest

HEAD = "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n  - name: a\n    command: [a]\n"


def readiness(body: str, key: str = "readiness") -> str:
    """A recipe whose only service has this readiness block (the key is on line 7)."""
    return (
        HEAD + f"    {key}:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "      ") + "\n"
    )


def test_no_probe(srt_problem) -> None:
    p = srt_problem(readiness("timeout_seconds: 30"))
    assert p.label == "services[a].readiness"
    assert p.message == "give exactly one probe (port, tcp, http, log or file), got none"
    assert (p.line, p.column) == (7, 5)


def test_empty_block(srt_problem) -> None:
    p = srt_problem(HEAD + "    readiness: {}\n")
    assert p.message == "give exactly one probe (port, tcp, http, log or file), got none"


def test_two_probes(srt_problem) -> None:
    p = srt_problem(
        readiness("""
        http: {port: 8000}
        log: {pattern: ready}
        """)
    )
    assert p.label == "services[a].readiness"
    assert p.message == "give exactly one probe (port, tcp, http, log or file), got http and log"
    assert (p.line, p.column) == (7, 5)


def test_port_shorthand_and_another_probe(srt_problem) -> None:
    p = srt_problem(
        readiness("""
        port: 9000
        http: {port: 8000}
        """)
    )
    assert p.message == "give exactly one probe (port, tcp, http, log or file), got http and tcp"


def test_port_shorthand_and_tcp(srt_problem) -> None:
    p = srt_problem(
        readiness("""
        port: 9000
        tcp: {port: 9000}
        """)
    )
    assert p.label == "services[a].readiness"
    assert p.message == "give either port (shorthand) or tcp, not both"
    assert (p.line, p.column) == (7, 5)


def test_invalid_regex(srt_problem) -> None:
    p = srt_problem(readiness("log: {pattern: 'ready ('}"))
    assert p.label == "services[a].readiness.log.pattern"
    assert p.message.startswith("is not a valid regular expression: missing )")
    assert (p.line, p.column) == (8, 13)


def test_log_needs_a_pattern(srt_problem) -> None:
    p = srt_problem(readiness("log: {}"))
    assert p.label == "services[a].readiness.log.pattern"
    assert p.message == "is required"
    assert (p.line, p.column) == (8, 7)


def test_http_path_without_slash(srt_problem) -> None:
    p = srt_problem(readiness("http: {port: 8000, path: health}"))
    assert p.label == "services[a].readiness.http.path"
    assert p.message == "must start with '/'"
    assert (p.line, p.column) == (8, 26)


@pytest.mark.parametrize(
    ("status", "message"),
    [(99, "must be at least 100, got 99"), (600, "must be at most 599, got 600")],
)
def test_http_status_out_of_range(srt_problem, status: int, message: str) -> None:
    p = srt_problem(readiness(f"http: {{port: 8000, status: {status}}}"))
    assert p.label == "services[a].readiness.http.status"
    assert p.message == message
    assert (p.line, p.column) == (8, 26)


def test_http_status_must_be_a_number(srt_problem) -> None:
    p = srt_problem(readiness("http: {port: 8000, status: ok}"))
    assert p.message == "must be a whole number, got 'ok'"


@pytest.mark.parametrize(
    ("text", "label", "message", "col"),
    [
        ("port: 0", "services[a].readiness.port", "must be at least 1, got 0", 7),
        ("port: 65536", "services[a].readiness.port", "must be at most 65535, got 65536", 7),
        ("tcp: {port: -1}", "services[a].readiness.tcp.port", "must be at least 1, got -1", 13),
        (
            "http: {port: 70000}",
            "services[a].readiness.http.port",
            "must be at most 65535, got 70000",
            14,
        ),
        ("port: '9000'", "services[a].readiness.port", "must be a whole number, got '9000'", 7),
    ],
)
def test_probe_port_range_and_type(
    srt_problem, text: str, label: str, message: str, col: int
) -> None:
    p = srt_problem(readiness(text))
    assert (p.label, p.message) == (label, message)
    assert (p.line, p.column) == (8, col)


def test_tcp_without_port(srt_problem) -> None:
    p = srt_problem(readiness("tcp: {}"))
    assert p.label == "services[a].readiness.tcp.port"
    assert p.message == "is required"
    assert (p.line, p.column) == (8, 7)


def test_probe_settings_must_be_a_mapping(srt_problem) -> None:
    p = srt_problem(readiness("tcp: 9000"))
    assert p.label == "services[a].readiness.tcp"
    assert p.message == "must be a mapping of tcp settings, got int"


def test_file_probe_needs_a_path(srt_problem) -> None:
    p = srt_problem(readiness("file: {path: '  '}"))
    assert p.label == "services[a].readiness.file.path"
    assert p.message == "must not be empty"


@pytest.mark.parametrize("key", ["timeout_seconds", "interval_seconds"])
@pytest.mark.parametrize(("value", "shown"), [(0, "0"), (-1, "-1"), (-0.5, "-0.5")])
def test_timings_must_be_positive(srt_problem, key: str, value: float, shown: str) -> None:
    p = srt_problem(readiness(f"port: 9000\n{key}: {value}"))
    assert p.label == f"services[a].readiness.{key}"
    assert p.message == f"must be greater than 0, got {shown}"
    assert (p.line, p.column) == (9, 7)


@pytest.mark.parametrize("value", [".inf", ".nan"])
def test_timings_must_be_finite(srt_problem, value: str) -> None:
    p = srt_problem(readiness(f"port: 9000\ntimeout_seconds: {value}"))
    assert p.label == "services[a].readiness.timeout_seconds"
    assert p.message == "must be a finite number"


def test_both_timings_reported_together(srt_problems) -> None:
    found = srt_problems(readiness("port: 9000\ntimeout_seconds: 0\ninterval_seconds: 0"))
    assert [(p.label, p.line) for p in found] == [
        ("services[a].readiness.timeout_seconds", 9),
        ("services[a].readiness.interval_seconds", 10),
    ]


def test_unknown_probe_with_a_suggestion(srt_problem) -> None:
    p = srt_problem(readiness("htpp: {port: 8000}"))
    assert p.label == "services[a].readiness.htpp"
    assert (
        p.message
        == "unknown probe 'htpp'; did you mean 'http'? (known: port, file, http, log, tcp)"
    )
    assert (p.line, p.column) == (8, 7)


def test_unknown_probe_without_a_close_name(srt_problem) -> None:
    p = srt_problem(readiness("grpc: {port: 8000}"))
    assert p.message == "unknown probe 'grpc' (known: port, file, http, log, tcp)"


def test_misspelt_setting_is_not_taken_for_a_probe(srt_problem) -> None:
    p = srt_problem(readiness("log: {pattern: ready}\ntimeout_secs: 30"))
    assert p.label == "services[a].readiness.timeout_secs"
    assert p.message == "unknown key; did you mean 'timeout_seconds'?"
    assert (p.line, p.column) == (9, 7)


def test_unknown_key_inside_a_probe(srt_problem) -> None:
    p = srt_problem(readiness("http: {port: 8000, pth: /ready}"))
    assert p.label == "services[a].readiness.http.pth"
    assert p.message == "unknown key; did you mean 'path'?"
    assert (p.line, p.column) == (8, 26)


def test_liveness_has_the_same_rules(srt_problem) -> None:
    p = srt_problem(readiness("htpp: {port: 8000}", key="liveness"))
    assert p.label == "services[a].liveness.htpp"
    assert "did you mean 'http'?" in p.message


def test_liveness_threshold(srt_problem) -> None:
    p = srt_problem(readiness("port: 9000\nfailure_threshold: 0", key="liveness"))
    assert p.label == "services[a].liveness.failure_threshold"
    assert p.message == "must be at least 1, got 0"


def test_role_probe_without_port_uses_the_worker_port(srt_plan) -> None:
    planned = srt_plan(
        """
        schema: 2
        name: t
        frontend: {type: vllm, command: [f]}
        roles:
          agg: {workers: 2, gpus_per_worker: 4, port: 8100, command: [w], readiness: {http: {}}}
        """
    )
    probes = [i.readiness for i in planned.unit("agg").instances]
    assert [p.config["port"] for p in probes if p is not None] == [8100, 8101]


def test_role_probe_without_any_port(srt_problem) -> None:
    p = srt_problem(
        """
        schema: 2
        name: t
        frontend: {type: vllm, command: [f]}
        roles:
          agg: {command: [w], readiness: {tcp: {}}}
        """
    )
    assert p.label == "roles.agg.readiness.tcp.port"
    assert p.message == "is required"
