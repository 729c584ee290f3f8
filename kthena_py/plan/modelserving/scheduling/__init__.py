"""Why a ModelServing's pods are not running yet: the ``Scheduled`` condition, decided from what the schedulers wrote.

:func:`~.verdict.decide_scheduled` reads the ModelServing's PodGroups (Volcano's phase and ``Unschedulable``
condition), its pods (``PodScheduled``, ``spec.nodeName``, requests), the Volcano Queues, the PriorityClasses and,
when it asks for them, the nodes' allocatable, and returns the condition, the Event of a transition and the wait
the metrics export. Pure: no I/O, no clock (``now`` is passed in). It reads :mod:`..core` only.
"""

from kthena_py.plan.modelserving.scheduling.verdict import (
    GroupWait,
    SchedulingDecision,
    SchedulingInputs,
    decide_scheduled,
    is_accelerator,
    queue_position,
    shorten,
)

__all__ = [
    "GroupWait",
    "SchedulingDecision",
    "SchedulingInputs",
    "decide_scheduled",
    "is_accelerator",
    "queue_position",
    "shorten",
]
