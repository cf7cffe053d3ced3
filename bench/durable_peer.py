"""T1's peer worker: pydantic-ai's ``TemporalAgent`` on the same task (runs in the peer's own environment).

    <peer python> bench/durable_peer.py <address> <task queue>

The agent asks the loopback model (``OPENAI_BASE_URL``), runs the three tools
it asks for as activities, and, as pydantic-ai's agent loop does, sends their
results back and asks the model again: two model calls per operation where
lionops and the floor make one. Started by ``bench/durable.py``; the workflow
is started by name (``PeerOperation``), so the driver never imports this module.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin, TemporalAgent

from durable_tools import charge, lookup, ship  # noqa: E402 - the bench directory is on sys.path

agent = Agent("openai-chat:bench", name="bench", tools=[lookup, charge, ship], system_prompt="You run the store.")
temporal_agent = TemporalAgent(agent)


@workflow.defn
class PeerOperation:
    @workflow.run
    async def run(self, instruction: str) -> dict[str, Any]:
        result = await temporal_agent.run(instruction)
        return {"result": result.output, "outputs": [None, None, None]}


async def serve(address: str, queue: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    worker = Worker(client, task_queue=queue, workflows=[PeerOperation], plugins=[AgentPlugin(temporal_agent)])
    print("ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    import os

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import durable_peer as _peer

    asyncio.run(_peer.serve(sys.argv[1], sys.argv[2]))
