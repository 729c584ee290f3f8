"""Not in the manager's image: the dev environment has colorama only for its tools.

structlog imports colorama when it can; the benchmark's kthena-py processes find this package first, so their
imports and resident memory are those of the manager as shipped (``bench/converge.py``, ``IMAGE_ONLY``).
"""

raise ImportError("colorama is not installed in the manager's image (bench/image_only)")
