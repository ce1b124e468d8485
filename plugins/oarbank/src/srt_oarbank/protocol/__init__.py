"""What service protocol 1 *says*: the documents executables print, the module manifest,
the name rule, platform ids, the error classes and the committed JSON Schemas.

Nothing here runs a process; the other parts build on these types.
"""
