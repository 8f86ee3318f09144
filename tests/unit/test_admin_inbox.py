"""The admin as review inbox: open tasks with their stories, decision buttons that check the role."""
import pytest

from tests.conftest import staff_client
from tests.flows import pending, submit

pytestmark = pytest.mark.django_db(transaction=True)



def test_the_task_page_shows_stories_with_criteria_and_the_options(alice, rita):
    task = pending(submit(alice), "stories_approval")
    page = staff_client(rita).get(f"/admin/lifecycle/reviewtask/{task.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "Refuse duplicate ISBNs" in html and "9780441013593" in html
    for option in ("approve", "reject", "request_changes"):
        assert f'value="{option}"' in html


def test_model_output_is_escaped_not_rendered(alice, rita, scripted):
    from tests.answers import BA_STORIES, PO_CLEAR

    hostile = {**BA_STORIES, "stories": [{**BA_STORIES["stories"][0], "title": "<script>alert(1)</script>"}]}
    scripted.enqueue(PO_CLEAR).enqueue(hostile)
    task = pending(submit(alice), "stories_approval")
    html = staff_client(rita).get(f"/admin/lifecycle/reviewtask/{task.pk}/change/").content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


def test_a_reviewer_approves_from_the_admin(alice, rita):
    req = submit(alice)
    task = pending(req, "stories_approval")
    client = staff_client(rita)
    response = client.post(f"/admin/lifecycle/reviewtask/{task.pk}/decide/", {"decision": "approve"}, follow=True)
    assert "approve recorded" in response.content.decode()
    task.refresh_from_db()
    assert (task.state, task.decided_by, task.decided_via) == ("resolved", rita, "admin")
    assert set(req.stories.values_list("state", flat=True)) == {"approved"}


def test_staff_without_the_reviewer_role_get_a_clear_message(alice, sam):
    task = pending(submit(alice), "stories_approval")
    response = staff_client(sam).post(f"/admin/lifecycle/reviewtask/{task.pk}/decide/",
                                      {"decision": "request_changes", "feedback": "Shorter stories"})
    html = response.content.decode()
    assert response.status_code == 403 and "no reviewer role" in html
    assert "Yours, not recorded (feedback): Shorter stories" in html
    task.refresh_from_db()
    assert task.state == "open"


def test_a_rejection_without_reason_is_refused_with_the_reason(alice, rita):
    task = pending(submit(alice), "stories_approval")
    response = staff_client(rita).post(f"/admin/lifecycle/reviewtask/{task.pk}/decide/", {"decision": "reject"},
                                       follow=True)
    assert "needs a reason" in response.content.decode()


def test_the_inbox_lists_only_the_reviewers_organizations_tasks(alice, rita, oscar):
    submit(alice)
    assert "Reading list" in staff_client(rita).get("/admin/lifecycle/reviewtask/").content.decode()
    assert "Reading list" not in staff_client(oscar).get("/admin/lifecycle/reviewtask/").content.decode()
