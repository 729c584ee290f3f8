"""The ServingGroup planner: which pods and Services to create, recreate or delete, and the status it reports.

``servinggroups`` is the entry (:func:`~.servinggroups.plan_servinggroups`); ``recovery`` decides what a failed
pod or role costs (restart the pod, the role or the group); ``status`` computes the ModelServing status;
``events`` shapes the Events the planner asks for.
"""
