"""Kthena's admission webhooks, served by every manager replica (not only the leader).

:func:`register` adds to a :class:`~kthena_py.runtime.manager.Manager`:

* a :class:`~kthena_py.runtime.webhook.WebhookServer` (TLS, ``--webhook-port``) with the validating handlers
  of ModelServing, AutoscalingPolicy, ModelBooster, ModelCache and ModelPool and the mutating handler of
  AutoscalingPolicy, at the paths of ``manifests/webhook/`` (:data:`VALIDATING_PATHS`, :data:`MUTATING_PATHS`);
  ModelPool and AutoscalingPolicy writes are also checked against the namespace's other pools and policies
  (:mod:`~kthena_py.controllers.admission.poolguard`), read live through the manager's client;
* in ``self`` certificate mode, a :class:`~kthena_py.runtime.certs.CertificateManager` that keeps the serving
  certificate in Secret ``kthena-py-webhook-server-cert`` of the manager's namespace (shared by all replicas,
  renewed 30 days before expiry) and its CA in ``caBundle`` of ``kthena-py-validating-webhook-configuration``
  and ``kthena-py-mutating-webhook-configuration``; the server serves from that Secret directly, without
  waiting for the kubelet to refresh the mounted copy;
* in ``cert-manager`` mode, nothing but the server, which serves ``tls.crt``/``tls.key`` from
  ``--webhook-cert-dir`` (the Secret cert-manager writes, mounted) and reloads them when they change; the
  Secret and ``caBundle`` are left to cert-manager and its CA injector;
* nothing of ``cryptography`` is imported until ``self`` mode needs it (about 8 MiB of resident memory that a
  manager without webhooks, or in ``cert-manager`` mode, does not pay);
* a readiness check ``webhook`` (``/readyz`` fails until the server listens with a certificate), so the
  webhook Service only routes to replicas that can answer.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal

from kthena_py.api.common import AUTOSCALING_POLICY_KIND, MODEL_BOOSTER_KIND, MODEL_SERVING_KIND
from kthena_py.api.modelcache import MODEL_CACHE_KIND
from kthena_py.api.modelpool import MODEL_POOL_KIND
from kthena_py.kube import KubeApi
from kthena_py.runtime.manager import Manager
from kthena_py.runtime.webhook import CertSource, FileCertSource, WebhookServer

from .handlers import mutate_autoscaling_policy, validator
from .poolguard import client_lister

__all__ = [
    "CERT_MODES",
    "CERT_SECRET",
    "MUTATING_CONFIGURATION",
    "MUTATING_PATHS",
    "SERVICE_NAME",
    "VALIDATING_CONFIGURATION",
    "VALIDATING_PATHS",
    "CertMode",
    "add_handlers",
    "register",
    "service_hosts",
]

CertMode = Literal["self", "cert-manager"]
CERT_MODES: tuple[CertMode, ...] = ("self", "cert-manager")

SERVICE_NAME = "kthena-py-webhook-service"
CERT_SECRET = "kthena-py-webhook-server-cert"
VALIDATING_CONFIGURATION = "kthena-py-validating-webhook-configuration"
MUTATING_CONFIGURATION = "kthena-py-mutating-webhook-configuration"

_PREFIX = "/validate-workload-serving-volcano-sh-v1alpha1-"
#: Validating webhook path of each kind.
VALIDATING_PATHS = {
    MODEL_SERVING_KIND: f"{_PREFIX}modelserving",
    AUTOSCALING_POLICY_KIND: f"{_PREFIX}autoscalingpolicy",
    MODEL_BOOSTER_KIND: f"{_PREFIX}modelbooster",
    MODEL_CACHE_KIND: "/validate-serving-kthena-py-io-v1alpha1-modelcache",
    MODEL_POOL_KIND: "/validate-serving-kthena-py-io-v1alpha1-modelpool",
}
#: Mutating webhook path of each kind.
MUTATING_PATHS = {AUTOSCALING_POLICY_KIND: "/mutate-workload-serving-volcano-sh-v1alpha1-autoscalingpolicy"}


def service_hosts(namespace: str, service: str = SERVICE_NAME) -> list[str]:
    """The DNS names the API server may use for the webhook Service (the first is what it uses)."""
    return [
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
    ]


def add_handlers(server: WebhookServer, client: KubeApi | None = None) -> None:
    """Add every Kthena admission handler to ``server`` at its path.

    Args:
        server: The webhook server.
        client: The client the checks across objects list through; ``None`` leaves them out (object-local rules
            only).
    """
    lister = client_lister(client) if client is not None else None
    for kind, path in VALIDATING_PATHS.items():
        server.add_handler(path, validator(kind, lister))
    server.add_handler(MUTATING_PATHS[AUTOSCALING_POLICY_KIND], mutate_autoscaling_policy)


def _own_namespace() -> str:
    namespace = os.environ.get("POD_NAMESPACE", "")
    if namespace:
        return namespace
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as handle:
            return handle.read().strip() or "kthena-system"
    except OSError:
        return "kthena-system"


def register(
    manager: Manager,
    port: int,
    cert_dir: str | None,
    mode: CertMode,
    *,
    bind_address: str = "0.0.0.0",
    namespace: str | None = None,
    extra_hosts: Sequence[str] = (),
) -> WebhookServer | None:
    """Serve the admission webhooks from every replica of ``manager``.

    Args:
        manager: The manager; the server (and certificate manager) run on every replica.
        port: The HTTPS port; 0 disables the webhooks (returns ``None``).
        cert_dir: Directory with ``tls.crt``/``tls.key`` (needed in ``cert-manager`` mode, unused in ``self``).
        mode: ``self`` (the manager creates and rotates its certificate) or ``cert-manager``.
        bind_address: Host to bind.
        namespace: Namespace of the certificate Secret and the webhook Service; default: ``$POD_NAMESPACE``,
            else the service account's namespace, else ``kthena-system``.
        extra_hosts: More DNS names or IP addresses for the ``self`` certificate, beside the Service's names
            (e.g. ``127.0.0.1`` when the API server calls the webhooks by URL, as in ``hack/local-up.sh``).

    Returns:
        The server, or ``None`` when disabled.

    Raises:
        ValueError: ``cert-manager`` mode without ``cert_dir``, or an unknown mode.
    """
    if port == 0:
        return None
    source: CertSource
    if mode == "self":
        from kthena_py.runtime.certs import CertificateManager  # cryptography: loaded only where certificates are made

        own = namespace or _own_namespace()
        certificates = CertificateManager(
            manager.client,
            namespace=own,
            secret_name=CERT_SECRET,
            hosts=[*service_hosts(own), *(host for host in extra_hosts if host not in service_hosts(own))],
            validating_webhooks=[VALIDATING_CONFIGURATION],
            mutating_webhooks=[MUTATING_CONFIGURATION],
        )
        manager.add_runnable(certificates.run, needs_leader=False)
        source = certificates.current
    elif mode == "cert-manager":
        if not cert_dir:
            raise ValueError("--webhook-cert-mode=cert-manager needs --webhook-cert-dir")
        source = FileCertSource(cert_dir)
    else:
        raise ValueError(f"unknown webhook certificate mode {mode!r}; want one of {', '.join(CERT_MODES)}")
    server = WebhookServer(source, host=bind_address, port=port)
    add_handlers(server, manager.client)
    manager.add_runnable(server.run, needs_leader=False)
    manager.probes.add_readiness_check("webhook", lambda: server.serving)
    return server
