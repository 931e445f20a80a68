"""The seed documents' situations as runnable scenarios, installed as ``harness.scenarios``.

Each module here tells one story from a seed (``shared/seeds``) in its docstring and defines
``SCENARIO``: a :class:`harness.Scenario` of catalogue subjects, a correct processor and named
buggy variants the harness must tell apart (``python -m harness run --all``). The modules use
only the public API. ``harness.catalogue.seeds.SCENARIOS`` lists them by name.

A wheel installs this folder as the package ``harness.scenarios``; in a source checkout,
``harness/scenarios/__init__.py`` points that package here.
"""
