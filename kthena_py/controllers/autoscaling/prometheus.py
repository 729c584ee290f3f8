"""Prometheus instant queries for ``metricSources[*].prometheus``.

Guarantees:

* One ``GET <serverURL>/api/v1/query?query=...&time=<now>`` per call, bounded by ``timeout`` seconds (connect,
  answer and body together); the caller's aiohttp session is reused (connection pooling per server).
* The answer must be a scalar, or a vector with exactly one sample, with a finite value; everything else is a
  :class:`PrometheusError` whose message follows Kthena's (autoscaler.md §1.2): ``unsupported prometheus
  serverURL scheme (must be http/https)``, ``prometheus query must return a single sample vector, got N``,
  ``prometheus returned non-finite value V for target Q``, ``unsupported prometheus query result type T``, plus
  the HTTP status or the server's own error text.
* Proxies from the environment are not used (the session is built with ``trust_env=False``).
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any
from urllib.parse import urlsplit

import aiohttp

__all__ = ["PrometheusError", "instant_query", "parse_query_result"]

_MAX_BODY = 4 << 20


class PrometheusError(Exception):
    """The query could not be answered with one finite number."""


def _number(value: Any, query: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as err:
        raise PrometheusError(f"prometheus returned a malformed value {value!r} for target {query}") from err
    if not math.isfinite(number):
        raise PrometheusError(f"prometheus returned non-finite value {value} for target {query}")
    return number


def parse_query_result(body: Any, query: str) -> float:
    """Extract the single value of an instant-query answer (the decoded JSON body).

    Args:
        body: The decoded ``/api/v1/query`` answer.
        query: The query (named in error messages).

    Returns:
        The value.

    Raises:
        PrometheusError: The answer is an error, or not one finite sample.
    """
    if not isinstance(body, dict):
        raise PrometheusError("prometheus answer is not a JSON object")
    if body.get("status") != "success":
        raise PrometheusError(f"prometheus query failed: {body.get('errorType', '')}: {body.get('error', body)}")
    data = body.get("data")
    if not isinstance(data, dict):
        raise PrometheusError("prometheus answer has no data")
    kind = data.get("resultType")
    result = data.get("result")
    if kind == "scalar":
        if not isinstance(result, list) or len(result) != 2:
            raise PrometheusError(f"malformed scalar result {result!r}")
        return _number(result[1], query)
    if kind == "vector":
        if not isinstance(result, list) or len(result) != 1:
            count = len(result) if isinstance(result, list) else 0
            raise PrometheusError(f"prometheus query must return a single sample vector, got {count}")
        sample = result[0]
        value = sample.get("value") if isinstance(sample, dict) else None
        if not isinstance(value, list) or len(value) != 2:
            raise PrometheusError(f"malformed vector sample {sample!r}")
        return _number(value[1], query)
    raise PrometheusError(f"unsupported prometheus query result type {kind}")


async def instant_query(
    session: aiohttp.ClientSession,
    server_url: str,
    query: str,
    *,
    at: float,
    timeout: float = 3.0,
) -> float:
    """Run an instant query and return its single value.

    Args:
        session: The HTTP session to use.
        server_url: Base URL of the Prometheus HTTP API (``http://`` or ``https://``).
        query: The PromQL expression.
        at: Evaluation time (Unix seconds).
        timeout: Seconds for the whole exchange.

    Returns:
        The value of the scalar or of the one sample.

    Raises:
        PrometheusError: Bad URL, transport error, timeout, HTTP error, or an unusable answer.
    """
    scheme = urlsplit(server_url).scheme
    if scheme not in ("http", "https"):
        raise PrometheusError(f"unsupported prometheus serverURL scheme (must be http/https): {server_url!r}")
    url = server_url.rstrip("/") + "/api/v1/query"
    try:
        async with asyncio.timeout(timeout):
            async with session.get(url, params={"query": query, "time": f"{at:.3f}"}) as resp:
                raw = await resp.content.read(_MAX_BODY)
                if not 200 <= resp.status <= 299:
                    text = raw[:200].decode("utf-8", "replace").strip()
                    raise PrometheusError(f"prometheus answered HTTP {resp.status}: {text}")
    except TimeoutError as err:
        raise PrometheusError(f"prometheus query timed out after {timeout:g}s") from err
    except aiohttp.ClientError as err:
        raise PrometheusError(f"prometheus request failed: {type(err).__name__}: {err}") from err
    try:
        body = json.loads(raw)
    except ValueError as err:
        raise PrometheusError(f"prometheus answer is not JSON: {err}") from err
    return parse_query_result(body, query)
