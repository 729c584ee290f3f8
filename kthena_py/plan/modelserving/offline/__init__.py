"""The planners run without a cluster: offline rendering and the rollout simulation.

``render`` is what ``kthena-py render`` prints; ``simulate`` drives the gang, ServingGroup and rollout
planners over an in-memory cluster for ``kthena-py rollout plan``.
"""
