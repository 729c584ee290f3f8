"""The vocabulary every layer shares: label and annotation keys, condition types, owners, pods, times.

Guarantees:

* Pure and at the bottom: imports nothing of kthena_py and no I/O library (import-linter enforces it), so the
  planners, the API models, the runtime and the controllers may all import it.
* Spelled once: a label or annotation key, or a condition type, is written as a literal only here
  (``test/unit/test_vocabulary.py`` reads the whole package to check it). Other modules import the names,
  and may re-export them under their historical names.
* Modules: :mod:`~.labels` (label and annotation keys, Kthena's, Volcano's, Kubernetes' and ours),
  :mod:`~.conditions` (condition types and their reasons), :mod:`~.owners` (owner references, "controlled
  by"), :mod:`~.pods` (phases, Running-and-Ready, terminating), :mod:`~.times` (RFC 3339).
"""
