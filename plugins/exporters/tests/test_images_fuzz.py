"""Any image and command on an exporter entry: the recipe loads or is refused with located
problems (never an exception from the image check), and what the check says agrees with
the image's repository name."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_exporters.images import NODE_IMAGE, repository_name
from srt_services.testing import RecipeError, kit

JOB = {
    "schema": 2,
    "name": "m",
    "resources": {"gpus_per_node": 1},
    "frontend": {"type": "sglang", "command": ["f"]},
    "roles": {"agg": {"workers": 1, "command": ["w"]}},
}

registries = st.sampled_from(["", "quay.io/", "registry.site:5000/mirror/", "a/b/c/"])
names = st.sampled_from(["node-exporter", "Node-Exporter", "node-exporter2", "nodeexporter"])
tags = st.sampled_from(["", ":v1.8.2", ":latest", "@sha256:" + "a" * 64, ":1@sha256:" + "b" * 64])
texts = st.text(min_size=1, max_size=40)


@given(registry=registries, name=names, tag=tags)
def test_the_repository_name_ignores_registry_tag_and_digest(
    registry: str, name: str, tag: str
) -> None:
    image = f"{registry}{name}{tag}"
    assert repository_name(image) == name.lower()
    assert NODE_IMAGE.matches(image) == (name.lower() == "node-exporter")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    image=st.one_of(st.builds(lambda r, n, t: r + n + t, registries, names, tags), texts),
    command=st.one_of(st.sampled_from(list(NODE_IMAGE.has)), texts),
    as_binary=st.booleans(),
)
def test_any_image_and_command_load_or_are_refused_with_their_field(
    srt_plugins: Any, image: str, command: str, as_binary: bool
) -> None:
    entry: dict[str, Any] = {"name": "ne", "type": "node-exporter", "container": image}
    if as_binary:
        entry["options"] = {"binary": command}
    else:
        entry["command"] = [command]
    try:
        kit.load(srt_plugins, {**JOB, "services": [entry]})
    except RecipeError as exc:
        text = str(exc)
        assert "services[ne]" in text
        refused = "is not in the image" in text
        # refused exactly when the image is the upstream one and the command is not its
        known = NODE_IMAGE.matches(image) and "{" not in command and command.strip()
        if refused:
            assert known and command not in NODE_IMAGE.has, text
        return
    assert not (
        NODE_IMAGE.matches(image) and "{" not in command and command not in NODE_IMAGE.has
    ), "an upstream image with a command it lacks must be refused"
