"""Cut ``metadata.managedFields`` out of an object's JSON before it is decoded.

An informer drops ``managedFields`` from every object it stores (:mod:`kthena_py.runtime.slim`), yet decoding a
watch event builds them first: a pod's field-ownership records are about half of its JSON and most of its
dictionaries. :func:`without_managed_fields` removes them from the encoded bytes, so the decoder never builds
them (a pod event decodes in about 0.6 of the time, and the collector sees none of those dictionaries).

Guarantees:

* **Exact or untouched.** The result decodes to the same value as ``line`` with the ``managedFields`` key of the
  object's own ``metadata`` removed, or it is ``line`` itself. Why the cut is exact: in a JSON text a ``"`` inside
  a string is always escaped, so the bytes ``"managedFields":[`` can only be a key and its array. The array is
  made of ``ManagedFieldsEntry`` objects, which hold strings and the ``fieldsV1`` map of maps, never an array,
  so the first ``]`` after it that is outside a string ends it. A ``]`` inside a string is never followed by
  ``},"spec":`` or ``,"name":"`` (the ``"`` would end the string, and a string cannot be followed by a letter),
  so the first ``]`` is only taken when one of those follows it; anything else leaves ``line`` as it is.
* **The object's own metadata only.** The cut is made only when the object's ``metadata`` comes before any other
  object-valued field (before ``"metadata":{``, ``":{`` shows up no more often than a watch event's ``"object":{``;
  an escaped quote in a string can show up as ``":{`` too, which only makes the cut be skipped) and no ``"spec":``
  precedes the key, so the records of a template inside a spec are never touched (an object without
  its own, or with a label named ``spec``, is decoded whole). In both layouts ``metadata`` is the first such field,
  and the API server keeps records on every object it stores, so the first record array is the object's own. The
  one exception: an object whose own records were cleared (``[{}]``) and not written since, with a record array
  nested in a later top-level field other than ``spec``; none of the kinds the manager watches nests one.
* **Both layouts the API server writes.** Built-in kinds are encoded field by field, ``managedFields`` last in
  ``metadata`` and ``spec`` next (``...]},"spec":``); custom resources are encoded with sorted keys, so ``name``
  follows it (``...],"name":"``). Any other layout (or no ``managedFields``) is decoded whole.
* Cheap: a few searches of the bytes and one copy of what is kept, about a tenth of what decoding the cut part
  costs.
"""

from __future__ import annotations

__all__ = ["without_managed_fields"]

_KEY = b'"managedFields":['
_TYPED_NEXT = b'},"spec":'
"""After the array of a built-in kind: ``metadata`` closes and ``spec`` follows."""
_SORTED_NEXT = b',"name":"'
"""After the array of a custom resource (sorted keys): ``name`` follows."""
_COMMA = ord(",")
_OBJECT_VALUE = b'":{'
"""A key whose value is an object (or an escaped quote inside a string: counted too, so a cut is only skipped)."""
_EVENT_OBJECT = b'"object":{'
"""The watch event's own object-valued key."""


def without_managed_fields(line: bytes) -> bytes:
    """``line`` (one JSON object, e.g. a watch event) without its object's ``metadata.managedFields``."""
    start = line.find(_KEY)
    if start <= 0:
        return line
    metadata = line.find(b'"metadata":{', 0, start)
    if metadata < 0 or line.find(b'"spec":', 0, start) >= 0:
        return line
    if line.count(_OBJECT_VALUE, 0, metadata) > line.count(_EVENT_OBJECT, 0, metadata):
        return line
    end = line.find(b"]", start + len(_KEY))
    if end < 0:
        return line
    if line.startswith(_TYPED_NEXT, end + 1) and line[start - 1] == _COMMA:
        return line[: start - 1] + line[end + 1 :]
    if line.startswith(_SORTED_NEXT, end + 1):
        return line[:start] + line[end + 2 :]
    return line
