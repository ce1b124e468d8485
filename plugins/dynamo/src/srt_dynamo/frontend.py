"""``python3 -m dynamo.frontend``: the OpenAI-compatible HTTP server in front of the workers.

It answers ``/health`` with 200 before any worker registered, so readiness is the served
model appearing in ``/v1/models`` (a body check): then a request can be served.
"""

from __future__ import annotations

from srt_services.extend import DefaultProbe, EngineProcess, Recipe

from srt_dynamo.build import container_of, served_model_name
from srt_dynamo.environment import frontend_env, interpreter
from srt_dynamo.install import install_command
from srt_dynamo.options import DynamoOptions

MODULE = "dynamo.frontend"


def models_probe(recipe: Recipe, options: DynamoOptions, port: int) -> DefaultProbe:
    """Ready when the served model is listed: a worker registered and can take requests."""
    return DefaultProbe(
        "http",
        {
            "port": port,
            "path": "/v1/models",
            "status": 200,
            "body": {"json": "data[].id", "equals": served_model_name(recipe)},
        },
        timeout=options.readiness_timeout_seconds,
    )


def build_frontend(recipe: Recipe, options: DynamoOptions, port: int) -> EngineProcess:
    """One frontend on ``port`` (``frontend.port``, or the internal port of one of several
    replicas behind srt's balancer)."""
    python = interpreter(options, container_of(recipe, None))
    argv = [python, "-m", MODULE, "--http-host", "{node_ip}", f"--http-port={port}"]
    return EngineProcess(
        argv=argv,
        env=frontend_env(recipe, options),
        preamble=install_command(options.install) if options.install is not False else None,
        readiness=models_probe(recipe, options, port),
        ports=(port,),
    )
