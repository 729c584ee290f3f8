"""Client-side request metrics, named as client-go names them.

Guarantees: every request the client layer sends is counted once in
``rest_client_requests_total{code,method,host}`` (``code`` is ``<error>`` when no answer came),
and its latency observed in ``rest_client_request_duration_seconds{verb,host}``; the time a request waited
for a connection its lane allows (:mod:`.client`) in ``rest_client_rate_limiter_duration_seconds{verb,host}``,
where client-go reports its rate limiter's wait. Every watch stream counts what it received: its bytes in
``kthena_watch_received_bytes_total{resource}`` and its events in ``kthena_watch_events_total{resource,type}``
(``resource`` is ``<plural>`` for the core group, ``<plural>.<group>`` otherwise): the traffic a sharded replica's
API-server filter divides, or its own filter does not. The collectors
are not registered anywhere by this module; the runtime adds them to the manager's registry.
"""

from __future__ import annotations

from typing import Final

from .tally import Tally, TallyHistogram

REQUEST_SECONDS_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
"""The request histograms' buckets, in seconds (client-go's latency buckets up to a minute)."""

# Updated for every request: lock-free (.tally) rather than prometheus-client metrics.
REST_CLIENT_REQUESTS: Final = Tally(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ("code", "method", "host"),
)
REST_CLIENT_LATENCY: Final = TallyHistogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds, broken down by verb and host.",
    ("verb", "host"),
    buckets=REQUEST_SECONDS_BUCKETS,
)
REST_CLIENT_WAIT: Final = TallyHistogram(
    "rest_client_rate_limiter_duration_seconds",
    "Seconds a request waited for a connection of its lane before it was sent, by verb and host.",
    ("verb", "host"),
    buckets=REQUEST_SECONDS_BUCKETS,
)
WRITE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Bumped for every watch event: lock-free tallies (.tally) rather than prometheus-client Counters.
WATCH_BYTES: Final = Tally(
    "kthena_watch_received_bytes_total",
    "Bytes received on watch streams (each event's line, as sent), by resource.",
    ("resource",),
)
WATCH_EVENTS: Final = Tally(
    "kthena_watch_events_total",
    "Watch events received, by resource and event type (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR).",
    ("resource", "type"),
)
