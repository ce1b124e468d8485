"""The checking layer: a recipe document and the plugin set to a checked recipe.

:func:`srt_services.checking.load.load_recipe` parses the text
(:mod:`srt_services.recipe`), validates it against the models, settles every service
against its kind (defaults, implied services, options), binds the probes, and runs the
rules across entries (:mod:`.rules`), reporting every problem at once with its line. The
result, :class:`~srt_services.checking.load.LoadedRecipe`, is what the planner takes.
This package's ``__init__`` stays empty so that importing a sibling module does not drag
in pydantic.
"""
