"""nginx in front of several frontend replicas (``frontend.replicas``).

One frontend process holds every client connection of a large job; srtctl's answer, which
srt keeps, is up to ten frontends on worker nodes behind one nginx on the head node (round
robin, or sticky on a header's value). The configuration is written into the balancer's
work directory and every path nginx writes (its pid, its temporary files) is under it, so
the same file runs as root in a container and as a plain user on a laptop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from srt_services.contracts.servers import url_host

if TYPE_CHECKING:
    from srt_services.recipe.models import BalancerSpec

#: What a proxied request may carry and wait for (srtctl's values: long generations).
CLIENT_MAX_BODY = "45m"
PROXY_TIMEOUT = "24h"
UPSTREAM_KEEPALIVE = 512


def nginx_conf(
    spec: BalancerSpec, listen_ip: str, port: int, upstreams: Sequence[tuple[str, int]]
) -> str:
    """The configuration of the balancer on ``listen_ip:port`` over ``upstreams``."""
    servers = "\n".join(f"        server {url_host(ip)}:{p};" for ip, p in upstreams)
    header = spec.session_affinity_header
    sticky = ""
    if header:
        variable = "$http_" + header.lower().replace("-", "_")
        sticky = f"        hash {variable} consistent;\n"
    return f"""# written by srt: nginx in front of the job's {len(upstreams)} frontends
pid nginx.pid;
error_log stderr info;
worker_processes auto;
events {{
    worker_connections 4096;
}}
http {{
    access_log off;
    client_body_temp_path client_body_temp;
    proxy_temp_path proxy_temp;
    fastcgi_temp_path fastcgi_temp;
    uwsgi_temp_path uwsgi_temp;
    scgi_temp_path scgi_temp;
    upstream frontends {{
{sticky}{servers}
        keepalive {UPSTREAM_KEEPALIVE};
    }}
    server {{
        listen {url_host(listen_ip)}:{port};
        client_max_body_size {CLIENT_MAX_BODY};
        keepalive_timeout {spec.keepalive_timeout};
        location / {{
            proxy_pass http://frontends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_read_timeout {PROXY_TIMEOUT};
            proxy_send_timeout {PROXY_TIMEOUT};
        }}
    }}
}}
"""


def nginx_argv(work_dir: str) -> list[str]:
    """nginx in the foreground, its prefix (relative paths) the balancer's work directory."""
    return ["nginx", "-p", work_dir, "-c", f"{work_dir}/nginx.conf", "-g", "daemon off;"]


def nginx_preamble(spec: BalancerSpec) -> str | None:
    return "ulimit -n 1048576" if spec.raise_ulimit else None
