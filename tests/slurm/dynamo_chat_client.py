"""Concurrent chat completions against the job's frontend, run as the job's benchmark.

usage: dynamo_chat_client.py MODEL COUNT [MAX_TOKENS]

Reads the frontend's address from ``SRT_FRONTEND_URL`` (srt sets it); sends COUNT requests
at once; each must answer 200 with MAX_TOKENS completion tokens and ``finish_reason:
length`` (the mocker's text is empty). Exits 0 only if all did. Plain standard library, so
it runs under any interpreter on the node.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def one(url: str, model: str, max_tokens: int) -> bool:
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens}
    ).encode()
    req = urllib.request.Request(
        url + "/v1/chat/completions", body, {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            answer = json.load(r)
    except OSError as exc:
        print("request failed:", exc, flush=True)
        return False
    usage = answer.get("usage", {}).get("completion_tokens")
    return bool(usage == max_tokens and answer["choices"][0]["finish_reason"] == "length")


def main() -> int:
    model, count = sys.argv[1], int(sys.argv[2])
    max_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    url = os.environ["SRT_FRONTEND_URL"]
    with ThreadPoolExecutor(count) as pool:
        ok = sum(pool.map(lambda _: one(url, model, max_tokens), range(count)))
    print(f"chats ok {ok}/{count} via {url}", flush=True)
    return 0 if ok == count else 1


if __name__ == "__main__":
    sys.exit(main())
