"""``kthena-py download``: a verified, resumable model downloader, command-line compatible with Kthena's.

The package is its own room: only :mod:`kthena_py.cli.download` imports it, and only its source adapters
(:mod:`kthena_py.download.sources`) import the heavy clients (``huggingface_hub``, ``boto3``), each when a
source of its kind is used, so the controller-manager never loads them.

Guarantees, for every source:

* every file is streamed into ``NAME.partial`` while its sha256 is computed (no second pass), checked against
  every digest the request or the source gives, and renamed to ``NAME`` only when it matches;
* the completion marker ``<out>/.kthena-complete`` is written last, atomically, and only when every file has
  verified; a later run whose request matches it makes no network request at all;
* a killed run leaves partials that the next run re-hashes locally and resumes with a ranged read;
* credentials go only to the endpoint they belong to and never into a log line, the marker or the result.

Layout: pure decisions (:mod:`.config`, :mod:`.credentials`, :mod:`.plan`, :mod:`.marker`, :mod:`.result`,
:mod:`.progress`, :mod:`.removal`, :mod:`.sources.spec`) and the thin layers that apply them
(:mod:`.state`, :mod:`.verify`, :mod:`.transfer`, :mod:`.reporting`, :mod:`.run`).
"""
