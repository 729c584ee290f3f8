"""``kthena-py manager``: run the controller-manager.

Guarantees: an unusable kubeconfig, an unreachable API server or an unusable bind address ends
the command with a one-line :class:`~kthena_py.cli.common.CommandError`, never a traceback. The
configuration is found as client-go finds it: ``--kubeconfig``, else ``$KUBECONFIG``, else the pod's
service account (in a cluster), else ``~/.kube/config``
(:meth:`~kthena_py.kube.KubeClient.from_environment`). The controllers, the Kubernetes client and the
servers are imported when the command runs, not when the parser is built; of the controllers only those
``--controllers`` enables (:mod:`kthena_py.controllers.selection`) are imported at all.
"""

from __future__ import annotations

import argparse
from typing import Any

from kthena_py import __version__
from kthena_py.runtime.eventcorrelator import DEFAULT_BURST, DEFAULT_MAX_SIMILAR

from .common import CommandError, non_negative_int, positive_int

#: ``--log-level`` choices (those of :data:`kthena_py.runtime.logconfig.LEVELS`).
LOG_LEVELS = ("debug", "info", "warning", "error")
#: ``--webhook-cert-mode`` choices (those of :data:`kthena_py.controllers.admission.CERT_MODES`).
CERT_MODES = ("self", "cert-manager")


def _address(value: str) -> str:
    from kthena_py.runtime.httpserver import parse_address

    try:
        parse_address(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return value


def _ttl(value: str) -> float:
    from kthena_py.api.duration import DurationError, parse_duration

    try:
        seconds = parse_duration(value) / 1e9
    except DurationError:
        try:
            seconds = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a duration: {value!r} (e.g. 60s, 2m)") from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value!r}")
    return seconds


def _split_controllers(value: str) -> list[str]:
    return value.split(",")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``manager`` and its flags."""
    m = sub.add_parser("manager", help="run the controller-manager")
    m.set_defaults(run=run)
    m.add_argument(
        "--kubeconfig",
        help="kubeconfig path (default: $KUBECONFIG, else the in-cluster service account, else ~/.kube/config)",
    )
    m.add_argument("--context", help="kubeconfig context")
    m.add_argument("--leader-elect", action="store_true", help="enable leader election (for >1 replica)")
    m.add_argument("--leader-election-id", default="kthena-py-controller-manager", help="Lease name")
    m.add_argument("--leader-election-namespace", default=None, help="Lease namespace (default: own namespace)")
    m.add_argument(
        "--sharding",
        action="store_true",
        help="run N active replicas, each reconciling the namespaces of its share of the hash space, instead of "
        "one leader (docs/sharding.md); replaces --leader-elect",
    )
    m.add_argument(
        "--lease-group",
        default="kthena-py-controller-manager",
        help="with --sharding: the lease group's name (its Leases live in --leader-election-namespace)",
    )
    m.add_argument(
        "--shard-informers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --sharding (default on): slots are ranges of the API server's own namespace hash, cut where the "
        "namespaces are, and where it filters (ShardedListAndWatch) each replica lists and watches only its ranges; "
        "--no-shard-informers: slots of a mixed hash, every replica caches everything (docs/sharding.md)",
    )
    m.add_argument("--lease-duration", type=float, default=15.0, help="seconds (default 15)")
    m.add_argument("--renew-deadline", type=float, default=10.0, help="seconds (default 10)")
    m.add_argument("--retry-period", type=float, default=2.0, help="seconds (default 2)")
    m.add_argument(
        "--metrics-bind-address",
        type=_address,
        default="127.0.0.1:8080",
        help="HOST:PORT, :PORT, or 0 to disable",
    )
    m.add_argument(
        "--health-probe-bind-address", type=_address, default="127.0.0.1:8081", help="HOST:PORT, :PORT, or 0"
    )
    m.add_argument("--webhook-port", type=int, default=9443, help="admission webhook port (0 disables)")
    m.add_argument("--webhook-cert-dir", default=None, help="directory with tls.crt/tls.key for the webhook")
    m.add_argument(
        "--webhook-cert-mode",
        choices=CERT_MODES,
        default="self",
        help="self: create, rotate and inject the webhook certificate (Secret kthena-py-webhook-server-cert); "
        "cert-manager: serve --webhook-cert-dir as it is and touch nothing (default: %(default)s)",
    )
    m.add_argument("--webhook-bind-address", default="0.0.0.0", help="host the webhook server binds (default: all)")
    m.add_argument(
        "--enable-eviction-webhook",
        action="store_true",
        help="enforce rolloutStrategy.evictionStrategy on pod evictions (the /validate-eviction endpoint and the "
        "eviction budget reconciler; needs manifests/eviction). Off: the endpoint admits every eviction",
    )
    m.add_argument(
        "--eviction-tracker-ttl",
        type=_ttl,
        default=60.0,
        metavar="DURATION",
        help="how long a granted eviction keeps its unit counted as disrupted at most, e.g. 60s (default 60s)",
    )
    m.add_argument(
        "--webhook-host",
        action="append",
        default=[],
        metavar="HOST",
        help="an extra DNS name or IP address for the self-managed webhook certificate, beside the Service's "
        "names (repeatable; e.g. 127.0.0.1 when the API server calls the webhook by URL)",
    )
    m.add_argument(
        "--controllers",
        action="extend",
        type=_split_controllers,
        default=None,
        metavar="NAME,...",
        help="controllers to run: modelserving, modelbooster, autoscaler, modelcache, modelpool; 'foo' or '+foo' "
        "enables foo, '-foo' disables it, '*' enables all not disabled (repeatable, comma-separated; default: '*', "
        "as Kthena)",
    )
    m.add_argument("--workers", type=positive_int, default=4, help="concurrent reconciles per controller")
    m.add_argument(
        "--event-burst",
        type=non_negative_int,
        default=DEFAULT_BURST,
        metavar="N",
        help="Events about one object and type written at once; then one every five minutes (0: no limit; "
        f"default: {DEFAULT_BURST}, client-go's)",
    )
    m.add_argument(
        "--event-combine-after",
        type=non_negative_int,
        default=DEFAULT_MAX_SIMILAR,
        metavar="N",
        help="from the Nth distinct message about one object, type and reason within ten minutes, Events are "
        f"combined into one whose count rises (0: never; default: {DEFAULT_MAX_SIMILAR}, client-go's)",
    )
    m.add_argument(
        "--api-connections",
        type=_api_connections,
        default=DEFAULT_API_CONNECTIONS,
        metavar="N",
        help="at most N connections to the API server at a time, watches included (at least "
        f"{MIN_API_CONNECTIONS}; default: {DEFAULT_API_CONNECTIONS})",
    )
    m.add_argument(
        "--autoscaler-sync-period",
        "--autoscaling-sync-period-seconds",
        dest="autoscaler_sync_period",
        type=float,
        default=None,
        help="seconds between autoscaling passes (default 15; Kthena's flag name is accepted too)",
    )
    m.add_argument(
        "--modelbooster-downloader-image",
        default=None,
        help="downloader image of ModelBooster pods (default: ConfigMap model-booster-controller-config, "
        "else kthena/downloader:latest)",
    )
    m.add_argument(
        "--modelbooster-runtime-image",
        default=None,
        help="runtime sidecar image of ModelBooster pods (default: ConfigMap model-booster-controller-config, "
        "else kthena/runtime:latest)",
    )
    m.add_argument(
        "--modelcache-downloader-image",
        default=None,
        help="image of ModelCache download and cleanup Jobs (default: kthena-py-downloader:latest)",
    )
    m.add_argument(
        "--modelcache-scheduler-name",
        default="volcano",
        help="scheduler of ModelCache Jobs; volcano also gets a one-member PodGroup per Job (default: volcano)",
    )
    m.add_argument(
        "--modelcache-cleanup-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="seconds after a ModelCache's deletion after which its finalizer goes even if the cleanup did not "
        "finish (default: 300)",
    )
    m.add_argument(
        "--model-attestation",
        choices=("off", "warn", "enforce"),
        default="off",
        help="ModelCache attestations: enforce = a cache whose files are not in a statement signed by a trusted key "
        "is never Ready; warn = it is Ready with AttestationVerified False; off = only caches that reference an "
        "attestation are checked, as warn (a cache's spec.attestation.policy can only tighten this; default: off)",
    )
    m.add_argument(
        "--model-attestation-keys",
        default=None,
        metavar="PATH",
        help="trusted public keys of ModelCache attestations: a directory of <keyid>.pem files and/or a "
        "keys.yaml|json listing {keyid, publicKey, notAfter} (e.g. a mounted Secret), read at start",
    )
    m.add_argument(
        "--modelcache-revalidation-concurrency",
        type=int,
        default=4,
        metavar="N",
        help="at most N ModelCache source revalidations (metadata requests) at a time, across all caches (default: 4)",
    )
    m.add_argument(
        "--adapter-load-timeout",
        type=_ttl,
        default=300.0,
        metavar="SECONDS",
        help="how long one LoRA adapter load may take (seconds or a duration: 300, 5m; the sidecar downloads first), "
        "and how long a manager waits for a load under way it started itself "
        "(default: 300)",
    )
    m.add_argument(
        "--adapter-max-concurrent-loads",
        type=positive_int,
        default=4,
        metavar="N",
        help="at most N LoRA adapter loads in flight per ModelServing (one at a time per pod; default: 4)",
    )
    m.add_argument("--namespace", default=None, help="only watch this namespace (default: all)")
    m.add_argument("--log-level", choices=LOG_LEVELS, default="info")
    m.add_argument("--log-format", choices=("json", "console"), default="json")
    m.add_argument(
        "--event-loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="the asyncio event loop to run on (default auto: uvloop when importable, else asyncio's own)",
    )
    m.add_argument(
        "--gc-threshold",
        type=_gc_thresholds,
        default=DEFAULT_GC_THRESHOLDS,
        metavar="N0,N1,N2",
        help="the cyclic garbage collector's thresholds (Python's gc.set_threshold; the counterpart of Go's GOGC; "
        f"default: {','.join(map(str, DEFAULT_GC_THRESHOLDS))})",
    )
    m.add_argument(
        "--timeline-file",
        default=None,
        metavar="PATH",
        help="diagnostics: append a JSON line per watch event, enqueue, reconcile start/end and status write "
        "to PATH (see bench/converge.py; default: off)",
    )


DEFAULT_GC_THRESHOLDS: tuple[int, int, int] = (100_000, 10, 10)
"""The cyclic collector's thresholds the manager runs with unless ``--gc-threshold`` says otherwise.

Python's own are (700, 10, 10). A young collection walks every tracked object allocated since the previous one
that is still alive, and a converging manager keeps thousands of requests, tasks and decoded objects in flight: the
larger the young generation, the more of them are gone before a collection walks them, and the fewer collections
walk the survivors again. Converging 500 ModelServings (``bench/converge.py --compare-gc``, docs/testing.md) the
collector held the manager 1.2-1.9 s in all with (10,000, 10, 10), 0.64-0.69 s with 100,000 and 0.45-0.65 s with
200,000, for the same resident size (165-169 MiB). The longest single pause sets the choice: 0.21-0.24 s with
100,000, no longer than the middle generation's 0.23 s with 10,000, against 0.43 s with 200,000
(``kthena_gc_pause_longest_seconds``). Full collections still come with the idle trim (:mod:`kthena_py.runtime.memory`).
At 100 ModelServings, 10,000 against Python's own was 0.92 of the manager's CPU."""
DEFAULT_API_CONNECTIONS = 100
"""``--api-connections``' default: the client's pool size (aiohttp's own default)."""
MIN_API_CONNECTIONS = 32
"""The smallest pool ``--api-connections`` accepts: every informer's watch holds a connection of its own."""


def _api_connections(text: str) -> int:
    """``--api-connections``: an integer no smaller than :data:`MIN_API_CONNECTIONS`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < MIN_API_CONNECTIONS:
        raise argparse.ArgumentTypeError(
            f"need at least {MIN_API_CONNECTIONS} connections (every informer's watch holds one), got {value}"
        )
    return value


def _gc_thresholds(text: str) -> tuple[int, int, int]:
    """``"N0,N1,N2"`` as three thresholds (N0 > 0, N1 and N2 >= 1)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        n0, n1, n2 = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three comma-separated integers N0,N1,N2, got {text!r}") from None
    if n0 <= 0 or n1 < 1 or n2 < 1:
        raise argparse.ArgumentTypeError(f"need N0 > 0 (0 turns the collector off) and N1, N2 >= 1, got {text!r}")
    return n0, n1, n2


def _attestation_settings(args: argparse.Namespace, log: Any) -> dict[str, Any]:
    """The ModelCache controller's attestation mode and keys (read now: a bad key fails the start)."""
    from kthena_py.attestation import ENFORCE, parse_mode

    mode = parse_mode(args.model_attestation)
    if args.model_attestation_keys is None:
        if mode == ENFORCE:
            raise CommandError("--model-attestation=enforce needs --model-attestation-keys (the trusted public keys)")
        return {"attestation_mode": mode}
    from kthena_py.cli.attest import read_key_dir

    keys = read_key_dir(args.model_attestation_keys)
    log.info("attestation keys loaded", mode=mode, keys=sorted(k.keyid for k in keys))
    return {"attestation_mode": mode, "attestation_keys": keys}


def _own_namespace() -> str:
    """``$POD_NAMESPACE`` (the Deployment sets it), else the service account's namespace, else kthena-system."""
    import os

    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as f:
            return f.read().strip() or "kthena-system"
    except OSError:
        return "kthena-system"


async def _run_manager(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    import structlog

    from kthena_py.controllers import admission, eviction, register_all
    from kthena_py.controllers.selection import MODELBOOSTER, MODELCACHE
    from kthena_py.kube import ApiError, ConfigError, KubeClient
    from kthena_py.runtime import native
    from kthena_py.runtime.eventloop import running_loop_name
    from kthena_py.runtime.manager import Manager, ManagerOptions

    log = structlog.get_logger("kthena_py.main")
    selection = args.controller_selection
    if selection.none_enabled:
        log.warning("No controllers are enabled", controllers=args.controllers, enabling=list(selection.enabled))
    try:
        client = await KubeClient.from_environment(args.kubeconfig, args.context, qps_pool=args.api_connections)
    except ConfigError as exc:
        raise CommandError(str(exc)) from exc
    # Nothing in the manager reads managedFields (its cache drops them): the answers are decoded without them.
    client.answers_managed_fields = False
    try:
        try:
            version = await asyncio.wait_for(client.server_version(), 15)
        except (ApiError, TimeoutError) as exc:
            raise CommandError(f"cannot reach the API server at {client.host}: {exc}") from exc
        options = ManagerOptions(
            namespace=args.namespace,
            leader_elect=args.leader_elect,
            leader_election_id=args.leader_election_id,
            leader_election_namespace=args.leader_election_namespace or _own_namespace(),
            sharding=args.sharding,
            lease_group=args.lease_group,
            shard_informers=args.shard_informers,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
            metrics_bind_address=args.metrics_bind_address,
            health_probe_bind_address=args.health_probe_bind_address,
            event_burst=args.event_burst,
            event_combine_after=args.event_combine_after,
        )
        # Each replica names itself to the API server, so an audit log attributes every write to one replica.
        client.user_agent = f"kthena-py/{__version__} manager ({options.identity})"
        try:
            manager = Manager(client, options)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        booster_settings = None
        if MODELBOOSTER in selection.enabled:
            from kthena_py.controllers.modelbooster import Settings

            booster_settings = Settings(
                downloader_image=args.modelbooster_downloader_image,
                runtime_image=args.modelbooster_runtime_image,
                config_namespace=_own_namespace(),
            )
        cache_settings = None
        if MODELCACHE in selection.enabled:
            from kthena_py.controllers.modelcache import Settings as CacheSettings

            cache_settings = CacheSettings(
                **_attestation_settings(args, log),
                scheduler_name=args.modelcache_scheduler_name,
                cleanup_timeout=args.modelcache_cleanup_timeout,
                revalidation_concurrency=max(1, args.modelcache_revalidation_concurrency),
                **({"downloader_image": args.modelcache_downloader_image} if args.modelcache_downloader_image else {}),
            )
        names = register_all(
            manager,
            controllers=selection.enabled,
            workers=args.workers,
            autoscaler_sync_period=args.autoscaler_sync_period if (args.autoscaler_sync_period or 0) > 0 else None,
            modelbooster_settings=booster_settings,
            eviction_budget=args.enable_eviction_webhook,
            modelcache_settings=cache_settings,
            adapter_load_timeout=args.adapter_load_timeout,
            adapter_max_loads=args.adapter_max_concurrent_loads,
        )
        try:
            server = admission.register(
                manager,
                args.webhook_port,
                args.webhook_cert_dir,
                args.webhook_cert_mode,
                bind_address=args.webhook_bind_address,
                extra_hosts=args.webhook_host,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if server is not None:
            eviction.add_webhook(server, manager, enabled=args.enable_eviction_webhook, ttl=args.eviction_tracker_ttl)
        log.info(
            "starting manager",
            version=__version__,
            server=client.host,
            server_version=version.get("gitVersion"),
            config=client.config_source,
            controllers=names,
            disabled=list(selection.disabled),
            namespace=args.namespace or "*",
            leader_elect=args.leader_elect,
            sharding=args.sharding,
            eviction_webhook=args.enable_eviction_webhook,
            event_loop=running_loop_name(),
            compiled_modules=native.report(),
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        from kthena_py.runtime.memory import time_collections, tune_collector

        frozen = tune_collector(args.gc_threshold)  # no collection walks what start-up left alive again
        log.debug("cyclic collector tuned", thresholds=list(args.gc_threshold), frozen_objects=frozen)
        time_collections()
        try:
            return await manager.run(stop)
        except OSError as exc:
            raise CommandError(f"cannot start: {exc}") from exc
    finally:
        await client.close()


def run(args: argparse.Namespace) -> int:
    """Run the manager until SIGTERM/SIGINT (0) or loss of leadership (1)."""
    if not 0 <= args.webhook_port <= 65535:
        raise CommandError(f"--webhook-port must be 0 (disabled) or a port number: {args.webhook_port}")
    if args.enable_eviction_webhook and not args.webhook_port:
        raise CommandError("--enable-eviction-webhook needs the webhook server (--webhook-port other than 0)")
    if args.webhook_port and args.webhook_cert_mode == "cert-manager" and not args.webhook_cert_dir:
        raise CommandError("--webhook-cert-mode=cert-manager needs --webhook-cert-dir")
    if args.sharding and args.leader_elect:
        raise CommandError("--sharding replaces --leader-elect: every replica is active on its own namespaces")
    if args.sharding and args.namespace:
        raise CommandError("--sharding divides namespaces between replicas; it cannot be combined with --namespace")
    if not 0 < args.retry_period < args.renew_deadline < args.lease_duration:
        raise CommandError("need 0 < --retry-period < --renew-deadline < --lease-duration")
    from kthena_py.controllers.selection import parse_controllers

    try:
        args.controller_selection = parse_controllers(["*"] if args.controllers is None else args.controllers)
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    from kthena_py.runtime import logconfig

    logconfig.configure(args.log_level, json=args.log_format == "json")
    if args.timeline_file:
        from kthena_py.runtime import timeline

        try:
            timeline.open_file(args.timeline_file)
        except OSError as exc:
            raise CommandError(f"cannot open --timeline-file: {exc}") from exc
        try:
            return _run_on_loop(args)
        finally:
            timeline.close()
    return _run_on_loop(args)


def _run_on_loop(args: argparse.Namespace) -> int:
    """Run the manager on the loop ``--event-loop`` names."""
    from kthena_py.runtime.eventloop import LoopUnavailable
    from kthena_py.runtime.eventloop import run as run_on_loop

    try:
        return run_on_loop(_run_manager(args), args.event_loop, log_choice=False)  # "starting manager" names it
    except LoopUnavailable as exc:
        raise CommandError(str(exc)) from exc
