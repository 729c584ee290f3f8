"""The subcommands of ``kthena-py``: one module each, with ``add_parser(sub)`` and a ``run(args) -> int``.

Importing a subcommand module is cheap: at module level it uses only the standard library, and it imports the
rest of kthena_py (and pydantic, the Kubernetes client, scipy, matplotlib) inside ``run``, when the subcommand is
chosen. ``test/unit/test_cli_startup.py`` holds every module to that.
"""
