"""The activator's decisions, pure (the I/O layer is :mod:`kthena_py.activator`).

Which ModelServing a model names, which pod serves a request, whether a target may be woken from zero, how long a
request is held, why a hold failed, when a request is retried, and the OpenAI-style error objects it answers with.

Guarantees: no I/O, no clock (times are passed in), inputs are never mutated; equal inputs give equal answers.
"""
