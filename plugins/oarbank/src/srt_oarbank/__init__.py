"""srt-oarbank: the agent side of service protocol 1.

The package root stays import-light on purpose: srt loads ``srt_oarbank.plugin`` through an
entry point, and nothing here should drag pydantic or psutil into ``srt --help``. Import the
submodules you need (``srt_oarbank.protocol.documents``, ``srt_oarbank.execution.executor``,
``srt_oarbank.lifecycle.manager`` ...).
"""

__version__ = "1.0.0"

__all__ = ["__version__"]
