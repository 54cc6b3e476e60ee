"""URL map. Each app owns its routes; this file only mounts them."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path

from platform_site import metrics, pages, views
from platform_site.login import AdminLoginForm
from platform_site.openapi import RedocView, SchemaView, SwaggerView

# The admin names the platform (not "Django administration"); "View site" goes to `/`.
admin.site.site_header = settings.PLATFORM_NAME
admin.site.site_title = settings.PLATFORM_NAME
admin.site.index_title = "Console"
admin.site.site_url = "/"
# The model list on the left would take a fifth of a 1280 px screen from every list; the
# breadcrumbs and the dashboard lead everywhere.
admin.site.enable_nav_sidebar = False
admin.site.login_form = AdminLoginForm

urlpatterns = [
    # First: Django tries the patterns in order, and the platform's API calls (a2a) are
    # the hot ones; at the end of the list they cost 0.1 ms each to reach.
    path("", include("a2a.urls")),
    path("", pages.home, name="home"),
    path("favicon.ico", pages.favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    # drf-spectacular's views, answering their errors as JSON (platform_site.openapi).
    path("api/schema/", SchemaView.as_view(), name="api-schema"),
    path("api/docs/", SwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", RedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("", include("agent_profiles.urls")),
    path("", include("gateway.urls")),
]

# Errors outside DRF's views: JSON under /api/, Django's pages elsewhere.
handler400 = "platform_site.views.bad_request"
handler403 = "platform_site.views.permission_denied"
handler404 = "platform_site.views.not_found"
handler500 = "platform_site.views.server_error"
