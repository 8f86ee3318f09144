"""Conversation tags for admin templates: the header's unread count, the requirement page's panel."""
from django import template
from django.urls import reverse

from lifecycle.services.conversations import unread_count, visible_conversations

register = template.Library()


@register.simple_tag(takes_context=True)
def conversations_unread(context) -> int:
    """Messages in the signed-in person's conversations they have not read (0 for anyone else)."""
    user = getattr(context.get("request"), "user", None)
    return unread_count(user) if user is not None and user.is_authenticated else 0


@register.inclusion_tag("admin/lifecycle/conversation/_ask_panel.html", takes_context=True)
def ask_panel(context, requirement):
    """The "Ask about this requirement" panel: it continues the person's latest conversation about it, or starts
    one."""
    request = context["request"]
    latest = visible_conversations(request.user).filter(requirement=requirement).order_by("-updated_at").first()
    return {"requirement": requirement, "conversation": latest, "csrf_token": context.get("csrf_token"),
            "ask_url": reverse("admin:lifecycle_conversation_ask"),
            "messages_url": reverse("admin:lifecycle_conversation_messages", args=[latest.pk]) if latest else "",
            "post_url": reverse("admin:lifecycle_conversation_post", args=[latest.pk]) if latest else "",
            "page_url": reverse("admin:lifecycle_conversation_change", args=[latest.pk]) if latest else ""}
