"""URL map. Each app owns its routes; this file only mounts them."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("agent_profiles.urls")),
    path("", include("a2a.urls")),
    path("", include("gateway.urls")),
]
