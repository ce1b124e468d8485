"""oarbank-protocol: the agent side of service protocol 1, usable on its own.

The top-level modules are what the protocol *says*: the documents executables print
(``documents``), the module manifest (``manifest``), the name rule (``names``), platform ids
(``platforms``), one error class per cause (``errors``), number parsing for command lines
(``numbers``) and the committed JSON Schemas (``schemas``). Nothing there runs a process.

The subpackages build on them: ``execution`` runs one operation safely, ``lifecycle``
keeps services alive on a node, ``agent`` holds the two agent programs, and
``conformance`` checks an executable against the spec.

The package root imports nothing, so ``import oarbank_protocol`` stays cheap for a host
program (srt's plugin among them) that only needs one part.
"""

__version__ = "1.0.0"

__all__ = ["__version__"]
