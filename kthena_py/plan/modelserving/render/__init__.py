"""The documents the ModelServing controller creates: pods and headless Services, Volcano PodGroups.

``pods`` renders a role instance's entry and worker pods and its Service from a revision; ``podgroups`` plans
one PodGroup per desired ServingGroup when gang scheduling applies. Both read the core's planning state only.
"""
