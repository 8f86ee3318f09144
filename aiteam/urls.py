from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from aiteam.health import healthz
from lifecycle.api.schema_view import SchemaView
from lifecycle.dashboard.meta_eval import meta_eval
from lifecycle.dashboard.views import dashboard, eval_run_export, eval_runs

admin.site.site_url = "/staff/dashboard/"  # the admin's "View site": the dashboard, for staff

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index"), name="home"),  # the review inbox's front door
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("staff/dashboard/", dashboard, name="staff-dashboard"),
    path("staff/evals/", eval_runs, name="staff-evals"),
    path("staff/meta-eval/", meta_eval, name="staff-meta-eval"),
    path("staff/evals/<int:run_id>.json", eval_run_export, name="staff-eval-export"),
    path("api/schema/", SchemaView.as_view(), name="schema"),
    path("api/v1/", include("lifecycle.api.urls")),
    path("webhooks/", include("lifecycle.webhooks.urls")),
]

# JSON under /api/ (docs/api.md: every error body is JSON), Django's pages elsewhere
handler400 = "lifecycle.api.errors.bad_request"
handler403 = "lifecycle.api.errors.permission_denied"
handler404 = "lifecycle.api.errors.page_not_found"
handler500 = "lifecycle.api.errors.server_error"
