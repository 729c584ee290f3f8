"""The planners run without a cluster: offline rendering.

``render`` is what ``kthena-py render`` prints. The rollout simulation behind ``kthena-py rollout plan`` drives the
planners over an in-memory cluster, so it lives above the planners, in :mod:`kthena_py.simulation`.
"""
