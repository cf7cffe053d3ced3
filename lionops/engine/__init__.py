"""The operation machine: definition, guards, phase handlers, engines, driver."""

from .definition import MachineDefinition, StateDef, TransitionDef, load_definition, default_definition
from .engines import CompiledEngine, Engine, TransitionsEngine, get_engine

__all__ = [
    "MachineDefinition", "StateDef", "TransitionDef", "load_definition", "default_definition",
    "Engine", "CompiledEngine", "TransitionsEngine", "get_engine",
]
