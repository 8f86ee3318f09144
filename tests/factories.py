import factory
from django.contrib.auth import get_user_model

from lifecycle.models import Membership, Organization, Project


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"org{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project
        django_get_or_create = ("organization", "slug")

    organization = factory.SubFactory(OrganizationFactory)
    slug = "default"
    name = factory.LazyAttribute(lambda p: f"{p.slug} project")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    organization = factory.SubFactory(OrganizationFactory)
    role = "reviewer"


def project_form_data(project: Project, **changes) -> dict:
    """What the Project admin form posts for `project` as it is stored, with `changes` over it."""
    fields = ("name", "slug", "repo_url", "base_branch", "host_kind", "token_env", "webhook_label",
              "github_webhook_secret_env", "gitlab_webhook_secret_env", "jira_webhook_secret_env")
    return {**{name: getattr(project, name) for name in fields}, "settings": "{}", **changes}
