"""LLMKube (``inference.llmkube.dev/v1alpha1``) -> kthena_py: Model, InferenceService and ModelPool.

* Model -> ModelCache (:mod:`.model`), InferenceService -> ModelServing + Service (+ AutoscalingPolicy)
  (:mod:`.inferenceservice`), ModelPool -> ModelPool (:mod:`.modelpool`).
* :data:`TRANSLATORS` maps ``(apiVersion, kind)`` to its translator; :data:`FIELD_TABLES` maps the same keys to
  the kind's field table, which covers every field of LLMKube's API for the kind exactly once (a row on an object
  copied whole covers what lies below it; see :func:`kthena_py.importers.documents.report_fields`). The docs
  render these tables.
"""

from __future__ import annotations

from kthena_py.importers.context import Translator
from kthena_py.importers.llmkube.common import API_VERSION, PEER
from kthena_py.importers.llmkube.inferenceservice import translate_inferenceservice
from kthena_py.importers.llmkube.inferenceservice_table import INFERENCESERVICE_TABLE
from kthena_py.importers.llmkube.model import translate_model
from kthena_py.importers.llmkube.model_table import MODEL_TABLE
from kthena_py.importers.llmkube.modelpool import translate_modelpool
from kthena_py.importers.llmkube.modelpool_table import MODELPOOL_TABLE
from kthena_py.importers.report import FieldRule

__all__ = ["API_VERSION", "FIELD_TABLES", "PEER", "TRANSLATORS"]

TRANSLATORS: dict[tuple[str, str], Translator] = {
    (API_VERSION, "Model"): translate_model,
    (API_VERSION, "InferenceService"): translate_inferenceservice,
    (API_VERSION, "ModelPool"): translate_modelpool,
}

FIELD_TABLES: dict[tuple[str, str], tuple[FieldRule, ...]] = {
    (API_VERSION, "Model"): MODEL_TABLE,
    (API_VERSION, "InferenceService"): INFERENCESERVICE_TABLE,
    (API_VERSION, "ModelPool"): MODELPOOL_TABLE,
}
