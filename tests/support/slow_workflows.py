"""Definitions for the workers tests: a workflow whose first step holds its
worker for as long as its run's ``hold_seconds`` say (a worker killed
meanwhile leaves the step in progress)."""

from __future__ import annotations

import time

from pgbus_web.runtime.definitions import Registry, Step, Workflow

SLOW = "SlowWorkflow"


def hold(ctx):
    time.sleep(float(ctx.arguments.get("hold_seconds", 60)))  # the behaviour: a step that takes its time
    return {"held": True}


def finish(ctx):
    return {"done": True}


SLOW_WORKFLOW = Workflow(SLOW, [Step("hold", hold), Step("finish", finish)])
REGISTRY = Registry([SLOW_WORKFLOW])
