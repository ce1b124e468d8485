"""Built-in probes: tcp, http, log and file (registered through ``srt_register_probes``)."""
