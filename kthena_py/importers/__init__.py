"""Translators from the peers' APIs (KubeAI, LLMKube) to kthena_py's objects, with a report for every field.

Pure: manifests (already parsed) in, objects and a field report out; no client, no file, no clock. The CLI
(``kthena-py import``) reads and writes.
"""
