"""srt-dynamo: the ``dynamo`` engine (``frontend.type: dynamo``) for srt."""
