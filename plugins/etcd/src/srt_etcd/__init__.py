"""srt-etcd: the ``etcd`` service kind for srt (the discovery plane of Dynamo jobs)."""

__version__ = "1.0.0"
