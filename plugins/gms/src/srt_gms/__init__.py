"""srt-gms: the ``gms`` service kind for srt (NVIDIA's GPU Memory Service, one per engine
worker, for shadow engine recovery with ``engine.failover``)."""

__version__ = "1.0.0"
