"""Plugin machinery: discovery and controls, loading, registries, hook calls, the typed
facade (:mod:`srt_services.plugins.manager`). The built-in plugin is :mod:`srt_services.builtin`."""
