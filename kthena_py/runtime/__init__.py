"""The controller runtime: clocks, rate limiters, work queues, metrics and the controller engine.

This package knows nothing of Kthena's API; it only provides the generic machinery a
controller-manager is built from.
"""
