"""The rollout planner: which units a rollout takes down, surges or updates in place, and in what order.

``rollout`` is the entry (:func:`~.rollout.plan_rollout`: a :class:`~.rollout.RolloutPlan` carrying its typed
:class:`~.rollout.RolloutStep`, one per pass);
``inplace`` patches pods whose change allows it; ``coordination`` keeps roles within their skew;
``history`` reads and rolls back ControllerRevisions; ``progress`` summarises a rollout for the CLI.
"""
