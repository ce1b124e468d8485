"""The recipe as a document: its text read and parsed with line marks, its pydantic models,
the problems found in it located at their line and column, and the document-level
transforms (placeholders, shell quoting, pinning source revisions, ``srt migrate``).

Nothing here knows the plugin set: checking a recipe against the installed kinds is the
layer above (:mod:`srt_services.checking`). This package's ``__init__`` stays empty so that
importing a sibling module does not drag in pydantic.
"""
