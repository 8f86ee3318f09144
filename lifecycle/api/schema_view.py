"""GET /api/schema/: drf-spectacular's view, with one version (kept apart from lifecycle.api.schema, which DRF's
settings import as DEFAULT_SCHEMA_CLASS while drf-spectacular's views module is still loading)."""
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer


class SchemaView(SpectacularAPIView):
    """GET /api/schema/. The API has one version: a ?version= is refused, not repeated into `info.version` and the
    file name as drf-spectacular does with any value when no versioning is configured. The schema comes in YAML or
    JSON as asked; an error in JSON, as every error under /api/."""

    @extend_schema(exclude=True)  # the schema does not describe itself (SERVE_INCLUDE_SCHEMA)
    def get(self, request, *args, **kwargs):
        if "version" in request.query_params:
            raise ValidationError({"version": ["the API has one version: leave ?version= out"]})
        return super().get(request, *args, **kwargs)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if response.exception:
            response.accepted_renderer, response.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return response
