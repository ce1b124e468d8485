"""The agents: the foreground agent for one service (``service``, ``python -m
oarbank_protocol.agent``: the process srt's ``oarbank`` kind runs) and the node agent that
runs bundles of modules with admission (``node``, ``python -m oarbank_protocol.agent.node``),
plus the control socket between the node agent and its clients (``control``) and what both
agent processes share (``process``: logging, signals).
"""
