"""nginx in front of several routers (doc §7): one public port, routers on 8180."""

from __future__ import annotations

from srt_srtctl.context import BuildContext
from srt_srtctl.process import ProcessSpec, SrunSpec

NGINX_CONF = "/logs/nginx.conf"


def nginx_command(ctx: BuildContext) -> str:
    raise_ulimit = ctx.config.frontend.nginx_raise_ulimit
    if raise_ulimit is None:
        raise_ulimit = ctx.cluster.nginx_raise_ulimit
    prefix = "ulimit -n 1048576 && " if raise_ulimit else ""
    return f"{prefix}nginx -c {NGINX_CONF} -g 'daemon off;'"


def nginx_conf(ctx: BuildContext) -> str:
    fe = ctx.config.frontend
    topo = ctx.topology.frontend
    servers = "\n".join(
        f"        server {ctx.values.ip(n)}:{topo.frontend_port};" for n in topo.frontend_nodes
    )
    balance = (
        f"        hash $http_{fe.nginx_session_affinity_header.lower().replace('-', '_')} consistent;\n"
        if fe.nginx_session_affinity_header
        else ""
    )
    return f"""worker_processes auto;
events {{
    worker_connections 65536;
}}
http {{
    upstream backend_servers {{
{balance}{servers}
        keepalive 512;
    }}
    keepalive_timeout {fe.nginx_keepalive_timeout};
    client_max_body_size 45m;
    server {{
        listen {topo.public_port};
        location / {{
            proxy_pass http://backend_servers;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_connect_timeout 24h;
            proxy_send_timeout 24h;
            proxy_read_timeout 24h;
        }}
    }}
}}
"""


def build_nginx(ctx: BuildContext) -> ProcessSpec:
    node = ctx.topology.frontend.nginx_node
    assert node is not None
    name = f"{node}_nginx"
    return ProcessSpec(
        stage="frontend",
        name=name,
        nodes=[node],
        argv=["bash", "-c", nginx_command(ctx)],
        container_image=ctx.cluster.resolve_container(ctx.config.frontend.nginx_container),
        container_mounts=ctx.base_mounts(),
        srun=SrunSpec(
            nodelist=[node],
            output=f"{ctx.values.log_dir}/{name}.out",
            options={"container-remap-root": ""},
            use_bash_wrapper=False,
        ),
        shell_argv=True,
    )
