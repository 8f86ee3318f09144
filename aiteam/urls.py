from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from aiteam.health import healthz
from lifecycle.dashboard.views import dashboard

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("staff/dashboard/", dashboard, name="staff-dashboard"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/v1/", include("lifecycle.api.urls")),
    path("webhooks/", include("lifecycle.webhooks.urls")),
]
