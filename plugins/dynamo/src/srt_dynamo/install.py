"""The shell text that installs Dynamo before a Dynamo process starts (srtctl's
``dynamo.install``), byte for byte what srtctl runs.

The install is wrapped in a lock on the container's ``sys.prefix`` and a sentinel file, so
the workers of one node that share a container install once; a preamble per process is the
only place where srt can run something inside each container before the command.
"""

from __future__ import annotations

from srt_dynamo.options import InstallOptions

#: srtctl's default when ``install`` names no source.
DEFAULT_VERSION = "0.8.0"
RUSTFLAGS = 'export RUSTFLAGS="${RUSTFLAGS:-} -C target-cpu=native --cfg tokio_unstable"'
RUSTUP = "curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y"
REPO = "https://github.com/ai-dynamo/dynamo.git"
PIP = "pip install --break-system-packages"


def _wrap(body: str) -> str:
    return (
        "DYN_LOCK_DIR=\"$(python3 -c 'import sys; print(sys.prefix)' 2>/dev/null || "
        'echo "${HOME:-/root}")" && ( flock -x 200; '
        'if [ -f "$DYN_LOCK_DIR/.srtctl_dynamo_install.complete" ]; then '
        "echo 'dynamo install already completed in this environment, skipping'; "
        f'else {{ {body} ; }} && touch "$DYN_LOCK_DIR/.srtctl_dynamo_install.complete"; fi ) '
        '200>"$DYN_LOCK_DIR/.srtctl_dynamo_install.lock"'
    )


def _version(v: str) -> str:
    return (
        f"echo 'Installing dynamo {v}...' && {PIP} --quiet --extra-index-url "
        f"https://pypi.nvidia.com ai-dynamo-runtime=={v} ai-dynamo=={v} && "
        f"echo 'Dynamo {v} installed'"
    )


def _wheel(version: str) -> str:
    name = wheel_name(version)
    return (
        f"echo 'Installing ai-dynamo-runtime and ai-dynamo from wheel {name}...' && "
        "if [ -f /srtctl-runtime/dynamo_wheels.py ]; then python3 "
        "/srtctl-runtime/dynamo_wheels.py install; else echo 'ERROR: "
        "/srtctl-runtime/dynamo_wheels.py not found for ai-dynamo wheel install' >&2; exit 1; fi "
        f"&& echo 'ai-dynamo-runtime and ai-dynamo install path completed for {name}'"
    )


def _hash(h: str) -> str:
    cache = f"/configs/dynamo-wheels/{h}"
    build = (
        "apt-get update -qq && apt-get install -y -qq libclang-dev curl git protobuf-compiler "
        "> /dev/null 2>&1 && if ! command -v cargo &>/dev/null; then "
        f"{RUSTUP} --default-toolchain stable -q && . $HOME/.cargo/env; fi && "
        f"{PIP} --force-reinstall --quiet maturin && DYN_BUILD_DIR=$(mktemp -d) && "
        f"cd $DYN_BUILD_DIR && git clone {REPO} && cd dynamo && git checkout {h} && "
        f"cd lib/bindings/python/ && {RUSTFLAGS} && rm -f /tmp/ai_dynamo_runtime*.whl && "
        f"maturin build --release -o /tmp && mkdir -p {cache} && "
        f"cp /tmp/ai_dynamo_runtime*.whl {cache}/ && cd $DYN_BUILD_DIR && "
        f"tar --exclude='target' --exclude='.git' -czf {cache}/dynamo-src.tar.gz dynamo && "
        f"touch {cache}/.complete && cd / && rm -rf $DYN_BUILD_DIR"
    )
    return (
        f"echo 'Installing dynamo from source ({h}, /configs cache)...' && "
        f"mkdir -p /configs/dynamo-wheels && ( flock -x 201; if [ ! -f {cache}/.complete ]; "
        f"then {build}; fi ) 201>/configs/dynamo-wheels/.{h}.lock && "
        f"{PIP} --force-reinstall {cache}/ai_dynamo_runtime-*.whl && rm -rf /tmp/dynamo-src && "
        f"mkdir -p /tmp/dynamo-src && tar -xzf {cache}/dynamo-src.tar.gz -C /tmp/dynamo-src && "
        f"{PIP} -e /tmp/dynamo-src/dynamo && echo 'Dynamo installed from source ({h})'"
    )


def _top_of_tree() -> str:
    sgl = (
        "apt-get update -qq && apt-get install -y -qq libclang-dev curl protobuf-compiler "
        "> /dev/null 2>&1 && if ! command -v cargo &>/dev/null; then "
        f"{RUSTUP} --default-toolchain stable -q && source $HOME/.cargo/env; fi && "
        f"{PIP} --force-reinstall --quiet maturin && cd /sgl-workspace/ && git clone {REPO} && "
        f"cd dynamo && cd lib/bindings/python/ && {RUSTFLAGS} && maturin build --release -o /tmp "
        "&& pip install /tmp/ai_dynamo_runtime*.whl && cd /sgl-workspace/dynamo/ && "
        "pip install -e . && cd /sgl-workspace/sglang/ && "
        "echo 'Dynamo installed from source (HEAD)'"
    )
    other = (
        "if ! command -v cargo &> /dev/null || ! command -v maturin &> /dev/null; then "
        "apt-get update -qq && apt-get install -y -qq git curl libclang-dev protobuf-compiler "
        "> /dev/null 2>&1 && if ! command -v cargo &> /dev/null; then "
        f"{RUSTUP} && source $HOME/.cargo/env; fi; fi && "
        f"{PIP} --force-reinstall --quiet maturin && ORIG_DIR=$(pwd) && "
        "rm -rf /tmp/dynamo_build && mkdir -p /tmp/dynamo_build && cd /tmp/dynamo_build && "
        f"git clone {REPO} && cd dynamo && cd lib/bindings/python/ && {RUSTFLAGS} && "
        "rm -f /tmp/ai_dynamo_runtime*.whl && maturin build --release -o /tmp && "
        f"{PIP} /tmp/ai_dynamo_runtime*.whl --force-reinstall && cd /tmp/dynamo_build/dynamo/ "
        f"&& {PIP} -e . && cd $ORIG_DIR && echo 'Dynamo installed from source (HEAD)'"
    )
    return (
        "echo 'Installing dynamo from source (HEAD)...' && if [ -d /sgl-workspace ]; then "
        f"{sgl}; else {other}; fi"
    )


def wheel_name(version: str) -> str:
    return f"ai_dynamo-{version}-py3-none-any.whl"


def install_command(install: InstallOptions) -> str:
    """The whole install text; ``hash``, ``top_of_tree`` and ``wheel`` each replace ``version``
    (srtctl's ``cargo_patches`` is not supported: no published recipe uses it)."""
    if install.hash:
        return _wrap(_hash(install.hash))
    if install.top_of_tree:
        return _wrap(_top_of_tree())
    if install.wheel:
        return _wrap(_wheel(install.wheel))
    return _wrap(_version(install.version or DEFAULT_VERSION))


def wheel_env(install: InstallOptions) -> dict[str, str]:
    """What srtctl's wheel installer reads (and what it exports to every Dynamo process)."""
    if not install.wheel:
        return {}
    return {"DYNAMO_WHEEL_NAME": wheel_name(install.wheel), "DYNAMO_VERSION": install.wheel}
