"""srt-exporters: the job's metrics on a real Prometheus.

Kinds ``node-exporter``, ``process-exporter``, ``dcgm-exporter`` (the exporters the spec
implies while ``observability.metrics`` is on) and ``prometheus`` (the scraper, on the
infra node, reading the ``file_sd`` list srt keeps), and the ``srt metrics`` command.
"""

__version__ = "1.0.0"
