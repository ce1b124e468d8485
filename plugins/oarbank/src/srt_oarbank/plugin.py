"""srt-oarbank's hook implementations (the srt kind and commands are wired in later)."""
