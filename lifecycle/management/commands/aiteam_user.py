"""Create (or reuse) an organization and a user with a role in it; print the user's API token."""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from rest_framework.authtoken.models import Token

from lifecycle.models import Membership, Organization, Project
from lifecycle.states import Role


class Command(BaseCommand):
    help = "Create or reuse an organization and a member with a role; prints the member's API token."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organization slug")
        parser.add_argument("--username", required=True)
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--project", default="default", help="project slug (created if missing)")
        parser.add_argument("--staff", action="store_true", help="also let the user log into the admin")

    @transaction.atomic
    def handle(self, *args, org, username, role, project, staff, **options):
        organization, _ = Organization.objects.get_or_create(slug=org, defaults={"name": org})
        Project.objects.get_or_create(organization=organization, slug=project, defaults={"name": project})
        user, _ = get_user_model().objects.get_or_create(username=username)
        if staff and not user.is_staff:
            user.is_staff = True
            user.save(update_fields=["is_staff"])
        Membership.objects.update_or_create(user=user, organization=organization, defaults={"role": role})
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
