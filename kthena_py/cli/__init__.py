"""The subcommands of ``kthena-py``: one module each, with ``add_parser(sub)`` and a ``run(args) -> int``."""
