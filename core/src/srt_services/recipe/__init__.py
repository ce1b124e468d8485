"""The load layer: recipe text to a validated :class:`~srt_services.recipe.models.Recipe`.

Import :func:`srt_services.recipe.load.load_recipe` to use it; this package's ``__init__``
stays empty so that importing a sibling module does not drag in pydantic.
"""
