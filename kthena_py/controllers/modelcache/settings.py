"""Settings of the ModelCache controller (the manager's ``--modelcache-*`` flags), injectable for tests.

Guarantees: every default is usable as is (the project's image, Volcano, a 5 minute cleanup bound); the
planner's settings are derived in one place (:meth:`Settings.plan_settings`), so a test that shortens the
cleanup bound or the backoff changes exactly what the planner sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kthena_py.attestation import OFF, Mode, TrustedKeys
from kthena_py.plan.modelcache import VOLCANO, AttestationSettings, Backoff, JobSettings, PlanSettings

__all__ = ["DEFAULT_DOWNLOADER_IMAGE", "Settings"]

DEFAULT_DOWNLOADER_IMAGE = "kthena-py-downloader:latest"
"""The project's image: it carries ``kthena-py download``."""


@dataclass(frozen=True)
class Settings:
    """ModelCache controller settings.

    Attributes:
        downloader_image: The image of download and cleanup Jobs (``--modelcache-downloader-image``).
        scheduler_name: The Jobs' scheduler (``--modelcache-scheduler-name``); ``volcano`` also creates a
            one-member PodGroup per Job.
        cleanup_timeout: Seconds after a cache's deletion after which its finalizer is removed even if the
            cleanup did not finish (``--modelcache-cleanup-timeout``).
        progress_port: The port download pods serve ``/progress`` on.
        progress_interval: Seconds between progress scrapes while a download runs.
        scrape_timeout: Seconds one progress scrape may take (a slow pod leaves the progress unset).
        backoff_base: Seconds before the first retry of a failed download; doubles per failure.
        backoff_cap: The longest wait between retries.
        backoff_limit: Pod retries inside one download Job.
        command: The downloader's command in the image.
        attestation_mode: ``--model-attestation`` (``off``, ``warn``, ``enforce``).
        attestation_keys: The trusted keys loaded at start from ``--model-attestation-keys``.
        attestation_recheck: Seconds between reads of a referenced attestation that does not verify.
        revalidation_concurrency: Source revalidations at a time across every cache
            (``--modelcache-revalidation-concurrency``).
        revalidation_timeout: Seconds one revalidation probe may take (the Secret's read included).
    """

    downloader_image: str = DEFAULT_DOWNLOADER_IMAGE
    scheduler_name: str = VOLCANO
    cleanup_timeout: float = 300.0
    progress_port: int = 8090
    progress_interval: float = 5.0
    scrape_timeout: float = 2.0
    backoff_base: float = 10.0
    backoff_cap: float = 600.0
    backoff_limit: int = 1
    command: tuple[str, ...] = ("kthena-py",)
    attestation_mode: Mode = OFF
    attestation_keys: TrustedKeys = field(default_factory=lambda: TrustedKeys({}))
    attestation_recheck: float = 30.0
    revalidation_concurrency: int = 4
    revalidation_timeout: float = 10.0

    def plan_settings(self) -> PlanSettings:
        """The planner's view of these settings."""
        return PlanSettings(
            job=JobSettings(
                image=self.downloader_image,
                scheduler_name=self.scheduler_name,
                progress_port=self.progress_port,
                backoff_limit=self.backoff_limit,
                command=self.command,
            ),
            backoff=Backoff(base=self.backoff_base, cap=self.backoff_cap),
            progress_interval=self.progress_interval,
            cleanup_timeout=self.cleanup_timeout,
            attestation=AttestationSettings(self.attestation_mode, self.attestation_keys, self.attestation_recheck),
        )
