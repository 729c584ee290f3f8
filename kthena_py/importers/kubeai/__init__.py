"""KubeAI (``kubeai.org/v1``) -> kthena_py: the Model translator and its field table.

``TRANSLATORS`` and ``FIELD_TABLES`` are keyed by ``(apiVersion, kind)``; :func:`kthena_py.importers.translate.
translate` dispatches on them, and docs/migrating.md renders ``FIELD_TABLES``.
"""

from __future__ import annotations

from kthena_py.importers.context import Translator
from kthena_py.importers.kubeai.fields import MODEL_FIELDS
from kthena_py.importers.kubeai.model import translate_model
from kthena_py.importers.report import FieldRule

__all__ = ["API_VERSION", "FIELD_TABLES", "TRANSLATORS"]

API_VERSION = "kubeai.org/v1"

TRANSLATORS: dict[tuple[str, str], Translator] = {(API_VERSION, "Model"): translate_model}
FIELD_TABLES: dict[tuple[str, str], tuple[FieldRule, ...]] = {(API_VERSION, "Model"): MODEL_FIELDS}
