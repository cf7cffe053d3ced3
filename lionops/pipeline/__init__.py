"""Internal: the ADR-0022 operation pipeline, one module per phase or decision.

In the order of one ``operate()`` call: :mod:`.prepare` (D1),
:mod:`.schema` (D2), :mod:`.adapter` (D3), :mod:`.validate` (the guards and
the validation policy), :mod:`.act` (D4, the governed path to tools),
:mod:`.enrich` (D4), :mod:`.outcomes`; :mod:`.context` holds the per-call
context and what the pipeline needs of a branch; :mod:`.machine` binds these
tables to the generic engine. Not part of the public API: use ``lionops``.
"""
