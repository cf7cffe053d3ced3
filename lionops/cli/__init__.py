"""The command line, the demo and the pytest plugin: the outermost layer.

- :mod:`lionops.cli.commands`: the ``lionops`` console script and ``python -m lionops``;
- :mod:`lionops.cli.diagram`: ``lionops diagram``, the machine drawn from states/;
- :mod:`lionops.cli.demo`: ``python -m lionops.cli.demo``, one recorded run replayed;
- :mod:`lionops.cli.pytest_plugin`: the ``lionops_cassette`` fixture.

Nothing here is imported by ``import lionops``; this package imports no
submodule of its own, so the pytest plugin loads nothing until used.
"""
