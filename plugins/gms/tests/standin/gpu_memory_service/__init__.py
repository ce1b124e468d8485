"""A STAND-IN for NVIDIA's GPU Memory Service server, for srt-gms's tests (no GPU here).

The real ``gpu_memory_service`` needs a CUDA GPU and is not on PyPI. This one keeps the
outside of it that srt depends on: the same command line (``python3 -m gpu_memory_service
--device K``), the same socket files (``$GMS_SOCKET_DIR/gms_<GPU UUID>_<tag>.sock`` for the
``weights`` and ``kv_cache`` tags, Unix stream sockets that accept connections), and it
runs until SIGTERM. The GPU UUID is made up from the physical GPU behind device K
(``CUDA_VISIBLE_DEVICES``), so a test can see which GPUs a server was given.

Knobs for fault tests (environment): ``GMS_STANDIN_FAIL_DEVICE=K`` exits 3 at start
for device K; ``GMS_STANDIN_NO_SOCKETS=1`` never creates its sockets;
``GMS_STANDIN_EXIT_AFTER=S`` exits 5 S seconds after its sockets exist.
"""
