"""What a staged model says about itself: GGUF headers and Hugging Face ``config.json`` (pure).

The package reads bytes it is given (a binary stream, a decoded dict) and never opens a socket; only
:mod:`.inspect` opens files, and only the ones of a staged model directory it is pointed at, reading at most the
header bytes the parser's caps allow. It imports nothing of kthena_py, so the downloader (which may not load the
API models) and the planners can both use it; the controller turns its JSON into the API's models.
"""

from .gguf import GGUFError, GGUFHeader, GGUFInfo, gguf_info, quantization_name, read_header
from .hfconfig import ConfigInfo, config_info

__all__ = [
    "ConfigInfo",
    "GGUFError",
    "GGUFHeader",
    "GGUFInfo",
    "config_info",
    "gguf_info",
    "quantization_name",
    "read_header",
]
