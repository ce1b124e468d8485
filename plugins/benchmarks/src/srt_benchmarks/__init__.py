"""srt-benchmarks: the ``sa-bench``, ``mooncake-router``, ``trace-replay``, ``gsm8k`` and
``gpqa`` benchmark kinds of srt and the runner each starts as the job's client
(``python -m srt_benchmarks``)."""
