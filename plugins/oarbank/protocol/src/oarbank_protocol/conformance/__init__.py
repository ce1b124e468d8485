"""The conformance runner: every requirement of service protocol 1 (and every rule of srt's
schemas where the spec is silent) as one declared check, run against any executable.
"""
