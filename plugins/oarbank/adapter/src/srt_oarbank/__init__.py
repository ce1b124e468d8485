"""srt-oarbank: service protocol 1 in srt.

The protocol itself (documents, executor, lifecycle manager, agents, conformance runner) is
the ``oarbank_protocol`` library; this package is only what srt needs on top of it: the
``oarbank`` service kind, the ``oarbank-ready`` and ``oarbank-probe`` readiness probes, the
``srt oarbank`` commands and ``srt oarbank expose`` (an srt service as a protocol
executable), all in :mod:`srt_oarbank.srt`.

The package root stays import-light on purpose: srt loads ``srt_oarbank.plugin`` through an
entry point, and nothing here should drag pydantic or psutil into ``srt --help``.
"""

__version__ = "1.0.0"

__all__ = ["__version__"]
