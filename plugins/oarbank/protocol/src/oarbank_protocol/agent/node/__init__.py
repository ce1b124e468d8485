"""The node agent: run bundles of modules on this node, and admit work against them.

``python -m oarbank_protocol.agent.node`` (``srt oarbank agent`` in srt). Where the
one-service agent (``python -m oarbank_protocol.agent``, the process srt's ``oarbank`` kind
runs) keeps a single service up, this is the agent the protocol describes for a node: one
:class:`~oarbank_protocol.lifecycle.manager.ModuleManager` per bundle, all on one
host-memory budget, with their lifecycles as the manifests say (``always`` services kept
running, ``on_demand`` ones started by the first admission that needs them and stopped
after ``idle_timeout_s``, ``manual`` ones only fingerprinted, idle ``yieldable`` ones
stopped under memory pressure), probes on their periods, reaping, and the control socket
(:mod:`oarbank_protocol.agent.control`) through which a job stage is admitted and released.

An admission is checked in full (capabilities, pool tokens, host memory with the
reservations of the services it would start) before anything starts, then waits until
those services are ready; one that touches several modules is all or nothing.

The parts: ``agent`` (:class:`NodeAgent`: the modules, admission across them, teardown),
``routing`` (``module/name`` and each module's part of a request), ``doctor`` (re-checking
capabilities on events), ``report`` (the ``status`` answer), ``requests`` (the control
socket's operations) and ``cli`` (the program: options, signals, exit status).

Not run by this agent (see docs/protocol-adapter.md): the sandbox and its container broker
(executables run as the agent's user, unconfined), and freezing (``freeze_ok`` is read and
reported, never acted on).
"""

from oarbank_protocol.agent.node.agent import NodeAgent, NodeAgentConfig
from oarbank_protocol.agent.node.cli import (
    EXIT_INCOMPLETE,
    EXIT_LOCKED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    build_parser,
    main,
)

__all__ = [
    "EXIT_INCOMPLETE",
    "EXIT_LOCKED",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "NodeAgent",
    "NodeAgentConfig",
    "build_parser",
    "main",
]
