"""The heart of the ModelServing planners: one planning state that every planner reads.

Read in this order: ``types`` (the contract: Observed in, Plan out), ``naming`` (names, labels, ordinals),
``groups`` (observed objects parsed into groups, roles, instances), ``revision`` (template hashes and the
ControllerRevision data; ``plugins`` for what a plugin adds to a pod), ``scaling`` and ``rolling`` (which ordinals
are wanted and how many may be unavailable or surged), ``targets`` (the desired fleet per group and role, computed
once; ``disruption`` for the units evictions recorded, which count as not ready) and ``state``
(:func:`~.state.build_state`: all of it packed into one :class:`~.state.PlanningState`). ``inplace_state`` is the
in-place update record kept on a pod.

Guarantee: every planner above (ServingGroups, PodGroups, rollout, eviction budget) gets its targets from
:func:`~.state.build_state`, so they agree on which units are wanted, which are disrupted and what the budget is.
"""
