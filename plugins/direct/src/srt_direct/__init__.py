"""srt-direct: the engines ``sglang``, ``vllm`` and ``trtllm-serve`` (no Dynamo) for srt."""
