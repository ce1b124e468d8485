"""The plugin-aware rules of a recipe, one module per family.

They run after the pydantic models accepted the recipe's shape (:func:`..checks.check`
runs them in order). Every rule appends a :class:`~srt_services.recipe.problems.Problem`
instead of raising, so one run reports everything that is wrong.

- ``job``: the frontend, the benchmark, the roles and the discovery planes they need;
- ``strings``: placeholders in the strings handed to processes, env names, srun options;
- ``probes``: readiness and liveness blocks, bound to their probe and config;
- ``metrics``: ``metrics`` annotations (services, roles, frontend);
- ``service``: one service entry: its kind, options, command, source, lifecycle;
- ``placement``: where a service runs and what it attaches to (node, pool, per);
- ``external``: services that srt does not launch;
- ``services``: the list as a whole: unique names, implied services merged in;
- ``envnames``: distinct ``SRT_SERVICE_<KEY>_*`` variables for every running service;
- ``cross``: rules between services (shared infra node, pools, terminal vs benchmark);
- ``after``: start-up dependencies between services.
"""
