"""Source adapters: list a source's files and stream their bytes from an offset.

Only :mod:`.spec` (parsing) and :mod:`.base` (the protocol) are light; each adapter module imports its client
(aiohttp, ``huggingface_hub``, ``boto3``, ``modelscope``) and is itself imported only by :func:`.factory.open_source`
when a source of its kind is used.
"""
