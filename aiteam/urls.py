from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from lifecycle.dashboard.views import dashboard

urlpatterns = [
    path("admin/", admin.site.urls),
    path("staff/dashboard/", dashboard, name="staff-dashboard"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/v1/", include("lifecycle.api.urls")),
]
