"""srt-nats: the ``nats`` service kind for srt (JetStream NATS for Dynamo's NATS planes)."""

__version__ = "1.0.0"
