"""One-shot readiness helpers for srt's ``oarbank`` kind and ``oarbank-probe`` probe."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from oarbank_protocol.errors import ManifestError
from oarbank_testkit import NODE, FakeBundle, run, service_entry
from srt_oarbank.srt.readiness import probe_ready, service_ready

pytestmark = pytest.mark.timeout(60)

BundleFactory = Callable[..., FakeBundle]


def test_service_ready_follows_the_protocol(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()], config={"ready_after_s": 0.3})
    before = run(service_ready(fake.root, "svc", node_id=NODE, data_dir=fake.data_dir))
    assert not before.ready
    assert "running=False" in before.detail
    run(fake.client().start())
    deadline = time.monotonic() + 5
    while not run(service_ready(fake.root, "svc", node_id=NODE, data_dir=fake.data_dir)).ready:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    fake.set_op("ready", stdout="garbage")
    broken = run(service_ready(fake.root, "svc", node_id=NODE, data_dir=fake.data_dir))
    assert not broken.ready
    assert "malformed" in broken.detail
    run(fake.client().stop())
    with pytest.raises(ManifestError):
        run(service_ready(fake.root, "nope", node_id=NODE, data_dir=fake.data_dir))


def test_probe_ready_gates_on_health(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(
        probes=[{"name": "jdk", "exec": ["bin/fake"]}],
        config={"services": {"jdk": {"health": "unhealthy", "detail": "no JDK 17"}}},
    )
    result = run(probe_ready(fake.root, "jdk", node_id=NODE, data_dir=fake.data_dir))
    assert not result.ready
    assert result.detail == "no JDK 17"
    fake.update_config(services={})
    assert run(probe_ready(fake.root, "jdk", node_id=NODE, data_dir=fake.data_dir)).ready


def test_service_ready_skips_a_platform_the_manifest_excludes(
    bundle_factory: BundleFactory,
) -> None:
    fake = bundle_factory(
        services=[service_entry(platforms=["darwin"])],
        probes=[{"name": "jdk", "exec": ["bin/fake"], "platforms": ["windows-x86_64"]}],
    )
    got = run(service_ready(fake.root, "svc", node_id=NODE, data_dir=fake.data_dir))
    assert not got.ready
    assert "does not run on platform" in got.detail and "darwin" in got.detail
    probe = run(probe_ready(fake.root, "jdk", node_id=NODE, data_dir=fake.data_dir))
    assert not probe.ready and "does not run on platform" in probe.detail
    assert fake.calls() == [] and fake.calls(service="jdk") == []
    here = run(
        service_ready(
            fake.root, "svc", node_id=NODE, data_dir=fake.data_dir, platform="darwin-aarch64"
        )
    )
    assert "does not run" not in here.detail and fake.calls("ready")


def test_service_ready_takes_the_manifests_timeout_then_the_kinds(
    bundle_factory: BundleFactory,
) -> None:
    fake = bundle_factory(
        services=[service_entry(timeouts={"ready": 0.4})],
        config={"ops": {"ready": {"sleep_s": 3}}},
    )
    began = time.monotonic()
    got = run(service_ready(fake.root, "svc", node_id=NODE, data_dir=fake.data_dir))
    assert not got.ready and "timed out after 0.4 s" in got.detail
    assert time.monotonic() - began < 2.5
    got = run(
        service_ready(
            fake.root, "svc", node_id=NODE, data_dir=fake.data_dir, timeouts={"ready": 0.2}
        )
    )
    assert "timed out after 0.2 s" in got.detail


def test_service_ready_refuses_ready_without_running(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()], config={"broken": ["ready_without_running"]})
    got = run(service_ready(fake.root, "svc", node_id=NODE, data_dir=fake.data_dir))
    assert not got.ready and "protocol violation" in got.detail


def test_service_ready_leaves_the_agents_files_alone(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()])
    files = fake.data_dir / ".oarbank"
    files.mkdir(parents=True)
    (files / "tools.json").write_text('{"docker": "/usr/bin/docker"}')
    (files / "settings.json").write_text('{"cpus": 4}')
    run(
        service_ready(
            fake.root,
            "svc",
            node_id=NODE,
            data_dir=fake.data_dir,
            settings={"cpus": 1},
            write_files=False,
        )
    )
    assert (files / "tools.json").read_text() == '{"docker": "/usr/bin/docker"}'
    assert fake.calls("ready")[0]["settings"] == {"cpus": 4}
