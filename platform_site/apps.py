from django.apps import AppConfig


class PlatformSiteConfig(AppConfig):
    """Settings, URLs, the console's templates, metrics, logging and tracing."""

    name = "platform_site"
    verbose_name = "Platform"

    def ready(self) -> None:
        from platform_site import tracing

        tracing.setup()  # on only when OTEL_TRACES_EXPORTER names an exporter
