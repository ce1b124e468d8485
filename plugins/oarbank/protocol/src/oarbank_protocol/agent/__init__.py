"""The agents: the foreground agent for one service (the ``oarbank`` kind's process,
``python -m oarbank_protocol.agent``) and the node agent that runs bundles of modules with
admission (``srt oarbank agent``), plus the control socket between the node agent and its
clients.
"""
