from django.apps import AppConfig


class PlatformSiteConfig(AppConfig):
    """Settings, URLs, the console's templates, metrics, logging and tracing."""

    name = "platform_site"
    verbose_name = "Platform"

    def ready(self) -> None:
        from platform_site import deploy_checks, tracing

        tracing.setup()  # on only when OTEL_TRACES_EXPORTER names an exporter
        # Imported, its system check is registered; and a distributed process on the
        # public SECRET_KEY says so once, at its start.
        deploy_checks.warn_at_start()
