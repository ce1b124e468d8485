"""srt-mooncake: the ``mooncake-master`` and ``mooncake-store`` service kinds for srt
(Mooncake's KV-cache master and the standalone stores that give it DRAM)."""

__version__ = "1.0.0"
