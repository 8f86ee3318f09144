from django.urls import path

from lifecycle.webhooks import slack
from lifecycle.webhooks.views import SOURCES, receive

urlpatterns = [path(f"{source}/<uuid:project_id>/", receive, {"source": source}, name=f"webhook-{source}")
               for source in SOURCES]
urlpatterns += [path("slack/events/", slack.events, name="webhook-slack-events"),
                path("slack/interactive/", slack.interactive, name="webhook-slack-interactive")]
