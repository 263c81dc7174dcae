"""What became of an agent: the status codes the task, its metrics and the renderers share."""

from __future__ import annotations

from enum import IntEnum


class AgentStatus(IntEnum):
    """Per-agent status at a step; an agent keeps its terminal status until its world resets."""

    ACTIVE = 0
    GOAL = 1
    COLLISION = 2
    OFFROAD = 3
    TIMEOUT = 4
