"""``format: uri`` (``PrometheusMetricSource.serverURL``) as the API server checks it: Go's ``url.ParseRequestURI``.

:data:`CASES` is shared with ``test/envtest/test_uri_format_agreement.py``, which replays every value against a
real kube-apiserver and asserts the same verdict; keep this module free of relative imports so it can be loaded
by path.
"""

from __future__ import annotations

from typing import Any

import pytest

from kthena_py.api import PrometheusMetricSource
from kthena_py.api.uri import URI_FORMAT, is_uri, uri_error
from kthena_py.api.validation import validate_document

#: (serverURL, None when accepted, else a fragment of the reason).
CASES: list[tuple[str, str | None]] = [
    # Accepted: absolute URIs.
    ("http://prometheus.monitoring.svc:9090", None),
    ("https://prom.example.com/prometheus/", None),
    ("HTTP://PROM:9090", None),
    ("http://10.0.0.5:9090", None),
    ("http://[::1]:9090", None),
    ("http://[::ffff:10.0.0.5]:9090", None),
    ("http://[fe80::1%25eth0]:9090", None),
    ("http://user:p%40ss@prom:9090", None),
    ("http://prom:", None),  # an empty port
    ("http://", None),  # an empty host
    ("http://prom:9090/a b", None),  # the path is only checked for escapes
    ("http://prom:9090/?q=%zz", None),  # the query is not checked
    ("http://prom:9090/#frag", None),
    ("http://a]b", None),
    ("mongodb://a:1,b:2", None),  # several colons outside http/https
    # Accepted: "scheme:opaque", whatever the opaque part holds.
    ("prom:9090", None),
    ("prometheus.monitoring.svc:9090", None),
    ("mailto:%zz", None),
    ("http: //prom", None),
    # Accepted: absolute paths and "*".
    ("/api/v1/prometheus", None),
    ("//prom:abc", None),  # no scheme: a path, not an authority
    ("*", None),
    # Refused: no scheme and not an absolute path (including bare hostnames).
    ("prometheus", "neither an absolute URI"),
    ("prometheus.monitoring.svc", "neither an absolute URI"),
    ("prom/api", "neither an absolute URI"),
    ("9090:prom", "neither an absolute URI"),
    (" http://prom:9090", "neither an absolute URI"),
    (":9090", "missing protocol scheme"),
    ("", "empty URI"),
    # Refused: control characters anywhere.
    ("http://prom:9090\n", "invalid control character"),
    ("http://prom:9090/\t", "invalid control character"),
    ("/metrics\x7f", "invalid control character"),
    # Refused: ports.
    ("http://prom:abc", 'invalid port ":abc" after host'),
    ("http://prom:9090:9091", 'invalid port ":9090:9091" after host'),
    ("http://::1/", 'invalid port "::1" after host'),
    ("http://[::1]x", 'invalid port "x" after host'),
    # Refused: hosts and IP literals.
    ("http://pro m:9090", 'invalid character " " in host name'),
    ("http://prom#frag", 'invalid character "#" in host name'),
    ("http://pröm\\x", 'invalid character "\\\\" in host name'),
    ("http://%41/", 'invalid URL escape "%41"'),
    ("http://[::1", "missing ']' in host"),
    ("http://x[::1]", "invalid IP-literal"),
    ("http://[10.0.0.5]", "invalid IP-literal"),
    ("http://[::g]", "invalid host"),
    ("http://[1::2::3]", "invalid host"),
    ("http://[fe80::1%25]", "invalid host"),
    ("http://[fe80::1%25%80]", 'invalid URL escape "%80"'),
    # Refused: userinfo and escapes.
    ("http://usér@prom", "invalid userinfo"),
    ("http://u%zz@prom", 'invalid URL escape "%zz"'),
    ("http://prom/%zz", 'invalid URL escape "%zz"'),
    ("/metrics%2", 'invalid URL escape "%2"'),
]

SOURCE_PATH = "spec.homogeneousTarget.target.metricSources[rps].prometheus.serverURL"


def policy(server_url: Any, name: str = "uri-format", namespace: str = "default") -> dict[str, Any]:
    """A valid AutoscalingPolicy whose only Prometheus source uses ``server_url``."""
    return {
        "apiVersion": "workload.serving.volcano.sh/v1alpha1",
        "kind": "AutoscalingPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "metrics": [{"name": "rps", "targetValue": "100"}],
            "homogeneousTarget": {
                "minReplicas": 1,
                "maxReplicas": 3,
                "target": {
                    "targetRef": {"kind": "ModelServing", "name": "ms"},
                    "metricSources": {"rps": {"prometheus": {"serverURL": server_url, "query": "up"}}},
                },
            },
        },
    }


def test_table_is_large_and_two_sided() -> None:
    accepted = [value for value, reason in CASES if reason is None]
    refused = [value for value, reason in CASES if reason is not None]
    assert len(accepted) >= 10 and len(refused) >= 10
    assert len({value for value, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("value", "reason"), CASES, ids=[repr(value) for value, _ in CASES])
def test_uri_error(value: str, reason: str | None) -> None:
    error = uri_error(value)
    if reason is None:
        assert error is None
        assert is_uri(value)
    else:
        assert error is not None and reason in error, error
        assert not is_uri(value)


@pytest.mark.parametrize(("value", "reason"), CASES, ids=[repr(value) for value, _ in CASES])
def test_validate_document_reports_the_field(value: str, reason: str | None) -> None:
    errors = [str(error) for error in validate_document(policy(value))]
    if reason is None:
        assert errors == []
    elif value == "":
        # The CRD's minLength: 1 answers first, as pydantic's min_length does.
        assert errors == [f'{SOURCE_PATH}: Invalid value: "": {SOURCE_PATH} in body should be at least 1 chars long']
    else:
        (error,) = errors
        assert error.startswith(f"{SOURCE_PATH}: Invalid value: ")
        assert f": {URI_FORMAT}: " in error and reason in error.partition(f": {URI_FORMAT}: ")[2]


def test_message_names_the_reason() -> None:
    (error,) = validate_document(policy("http://prom:abc"))
    assert str(error) == (
        f'{SOURCE_PATH}: Invalid value: "http://prom:abc": '
        'must be a URI (an absolute URI or an absolute path): invalid port ":abc" after host'
    )


def test_model_refuses_a_bad_url_when_built_from_python() -> None:
    assert (
        PrometheusMetricSource.model_validate({"server_url": "/prometheus", "query": "up"}).server_url == "/prometheus"
    )
    with pytest.raises(ValueError, match="must be a URI"):
        PrometheusMetricSource.model_validate({"server_url": "prometheus", "query": "up"})


def test_never_raises_on_odd_input() -> None:
    for value in [
        "%",
        "[",
        "]",
        "@",
        "http://@",
        "http://[",
        "http://[]",
        "http://[%25]",
        "\ud800",
        "x:\x00",
        "a" * 5000,
    ]:
        assert uri_error(value) is None or isinstance(uri_error(value), str)
