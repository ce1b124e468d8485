"""One module per backend Dynamo runs (``python3 -m dynamo.<backend>``): its argv, the flags
it sets itself (a recipe's copy is dropped with a warning) and what it adds to the env."""

from __future__ import annotations

from srt_dynamo.backends import mocker, sglang, trtllm, vllm
from srt_dynamo.backends.base import Backend

BACKENDS: dict[str, Backend] = {
    "mocker": mocker.BACKEND,
    "sglang": sglang.BACKEND,
    "vllm": vllm.BACKEND,
    "trtllm": trtllm.BACKEND,
}
