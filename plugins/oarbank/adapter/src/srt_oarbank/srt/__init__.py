"""The srt glue: the ``oarbank`` service kind, the ``oarbank-ready``/``oarbank-probe``
readiness probes, ``srt oarbank`` commands, and ``srt oarbank expose`` (an srt service as a
protocol executable).
"""
