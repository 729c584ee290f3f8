"""kthena_py: a Python controller-manager for Kthena's workload API (``workload.serving.volcano.sh/v1alpha1``)."""

__version__ = "0.1.0"
