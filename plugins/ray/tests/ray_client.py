"""A benchmark step that uses a Ray cluster the way an RL driver does: through the
environment srt gives it, and the dashboard's job-submission API only.

It submits a Ray job whose driver counts the cluster's ALIVE nodes, waits for it, and
prints ``RAY_NODES <n>`` (the driver's count) and ``NODE_IPS [...]`` (the addresses the head
lists). Exit 0 only when the job succeeded and counted ``argv[1]`` nodes.

The driver runs this interpreter (``sys.executable``): Ray starts a submitted entrypoint
with the head's PATH, where ``python`` may be another Python without Ray.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request

from ray.job_submission import JobStatus, JobSubmissionClient

DRIVER = "import ray; ray.init(); print('RAY_NODES', sum(n['Alive'] for n in ray.nodes()))"
DONE = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}


def main(want: int) -> int:
    dashboard = os.environ["RAY_API_SERVER_ADDRESS"]
    print(f"RAY_ADDRESS={os.environ.get('RAY_ADDRESS')} dashboard={dashboard}", flush=True)
    client = JobSubmissionClient()  # reads RAY_API_SERVER_ADDRESS
    job = client.submit_job(entrypoint=f'{sys.executable} -c "{DRIVER}"')
    deadline = time.monotonic() + 240
    while (status := client.get_job_status(job)) not in DONE and time.monotonic() < deadline:
        time.sleep(0.2)
    info = client.get_job_info(job)
    print(f"job {job}: {status} {info.message}", flush=True)
    logs = client.get_job_logs(job)
    print(logs, flush=True)
    with urllib.request.urlopen(f"{dashboard}/api/v0/nodes?limit=10000", timeout=10) as r:
        nodes = json.load(r)["data"]["result"]["result"]
    alive = sorted(n["node_ip"] for n in nodes if n["state"] == "ALIVE")
    print("NODE_IPS", json.dumps(alive), flush=True)
    counted = [line.split()[1] for line in logs.splitlines() if line.startswith("RAY_NODES ")]
    return 0 if status == JobStatus.SUCCEEDED and counted == [str(want)] else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
