"""Internal: a generic finite-state machine runner (definition, engines, driver).

The engine is given every table it runs by its caller (the operate machine
is bound in :mod:`lionops.pipeline.machine`); it imports nothing of
ADR-0022. Not part of the public API: import from the submodules.
"""
