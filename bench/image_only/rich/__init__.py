"""Not in the manager's image: the dev environment has rich only for its tools (import-linter).

structlog uses rich when it can import it; the benchmark's kthena-py processes find this package first, so their
imports and resident memory are those of the manager as shipped (``bench/converge.py``, ``IMAGE_ONLY``).
"""

raise ImportError("rich is not installed in the manager's image (bench/image_only)")
