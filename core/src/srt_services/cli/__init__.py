"""The ``srt`` command line (rich-click)."""
