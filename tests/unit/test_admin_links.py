"""Every admin link a page shows opens for the person shown it: a related object the viewer may not open is plain
text, and an "Add" link is hidden from who may not add."""
import re

import pytest
from django.contrib.auth import get_user_model

from lifecycle.models import FailureRoute, Requirement, StateTransition, Step
from tests.conftest import staff_client

pytestmark = pytest.mark.django_db(transaction=True)
ADMIN_HREF = re.compile(r'href="(/admin/[^"#]*)"')


@pytest.fixture
def failed_run(acme_project, alice):
    requirement = Requirement.objects.create(organization=acme_project.organization, project=acme_project, brief="b",
                                             title="Reading list", submitted_by=alice)
    StateTransition.objects.create(requirement=requirement, subject_id=str(requirement.pk), event="submit",
                                   from_state="draft", to_state="clarifying", actor_user=alice, via="admin")
    step = Step.objects.create(requirement=requirement, key="self_test", attempt=1, state="failed")
    route = FailureRoute.objects.create(organization=acme_project.organization, requirement=requirement, step=step,
                                        source="self_test", summary="tests failed", route="retry", rule="flaky",
                                        action="retried")
    return requirement, route


def admin_links(client, page: str) -> set[str]:
    response = client.get(page)
    assert response.status_code == 200, page
    return {href.replace("&amp;", "&") for href in ADMIN_HREF.findall(response.content.decode())} - {"/admin/logout/"}


def refused(client, pages: list[str]) -> dict[str, int]:
    links = set().union(*(admin_links(client, page) for page in pages))
    assert links
    return {href: status for href in sorted(links) if (status := client.get(href).status_code) == 403}


def test_no_link_a_staff_member_is_shown_answers_403(failed_run, alice):
    requirement, route = failed_run
    client = staff_client(alice)
    pages = [f"/admin/lifecycle/requirement/{requirement.pk}/change/",
             f"/admin/lifecycle/failureroute/{route.pk}/change/", "/admin/"]
    assert refused(client, pages) == {}
    html = client.get(pages[0]).content.decode()
    assert "Acme" in html and "alice" in html  # still shown, as text


def test_no_link_a_superuser_is_shown_answers_403(failed_run):
    requirement, route = failed_run
    operator = get_user_model().objects.create_superuser("ops", "ops@example.test", "x")
    client = staff_client(operator)
    pages = [f"/admin/lifecycle/requirement/{requirement.pk}/change/",
             f"/admin/lifecycle/failureroute/{route.pk}/change/", "/admin/"]
    assert refused(client, pages) == {}
    html = client.get(pages[1]).content.decode()
    assert f'href="/admin/lifecycle/step/{route.step_id}/change/"' in html  # who may open it keeps the link
