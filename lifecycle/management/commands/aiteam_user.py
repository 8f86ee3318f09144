"""Create (or reuse) an organization and a user with a role in it; print a new API token for the user.

The token is shown here once: only its digest is stored. Each run issues another; revoke old ones in the admin.
"""
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug
from django.db import transaction

from lifecycle.models import ApiToken, Membership, Organization, Project
from lifecycle.services.tokens import token_issue
from lifecycle.states import Role


class Command(BaseCommand):
    stealth_options = ("stdin",)  # as createsuperuser: tests pass a stream
    help = "Create or reuse an organization and a member with a role; prints a new API token (shown only now)."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organization slug (letters, digits, - and _; created if missing)")
        parser.add_argument("--username", required=True, help="the user's login name (created if missing)")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--project", default="default", help="project slug (created if missing)")
        parser.add_argument("--staff", action="store_true", help="also let the user log into the admin")
        parser.add_argument("--password-stdin", action="store_true",
                            help="set the user's password to the first line of standard input (Django's validators check it)")
        parser.add_argument("--token-name", default="aiteam_user", help="what the new token is for (shown in the admin)")

    @transaction.atomic
    def handle(self, *args, org, username, role, project, staff, token_name, **options):
        _check_slug("--org", org, Organization)
        _check_slug("--project", project, Project)
        _check_username(username)
        organization, _ = Organization.objects.get_or_create(slug=org, defaults={"name": org})
        Project.objects.get_or_create(organization=organization, slug=project, defaults={"name": project})
        user, _ = get_user_model().objects.get_or_create(username=username)
        if options["password_stdin"]:
            _set_password(user, (options.get("stdin") or sys.stdin).readline().rstrip("\r\n"))
        if staff and not user.is_staff:
            user.is_staff = True
            user.save(update_fields=["is_staff"])
        Membership.objects.update_or_create(user=user, organization=organization, defaults={"role": role})
        self.stdout.write(token_issue(token=ApiToken(user=user, name=token_name)))


def _check_slug(option: str, value: str, model) -> None:
    limit = model._meta.get_field("slug").max_length
    try:
        validate_slug(value)
    except ValidationError:
        raise CommandError(f"{option} {value!r} is not a slug: use letters, digits, hyphens and underscores") from None
    if len(value) > limit:
        raise CommandError(f"{option} {value!r} is longer than {limit} characters")


def _check_username(username: str) -> None:
    field = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD)
    try:
        field.clean(username, None)
    except ValidationError as exc:
        raise CommandError(f"--username {username!r}: {' '.join(exc.messages)}") from None


def _set_password(user, password: str) -> None:
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise CommandError(f"--password-stdin: the password is refused: {' '.join(exc.messages)}") from None
    user.set_password(password)
    user.save(update_fields=["password"])
