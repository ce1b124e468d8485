# The srt plugin-author kit: isolated plugin sets, register-for-one-test, a hook recorder.
pytest_plugins = ["srt_services.testing.pytest_plugin"]
