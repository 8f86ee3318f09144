"""Budget limits resolution (pure): playbook defaults, then the project's, then the requirement's overrides."""
from decimal import Decimal

import pytest

from lifecycle import budget_limits as bl


def test_each_playbook_has_its_own_defaults_and_an_unknown_one_gets_new_features():
    feature, bug = bl.resolve("new_feature"), bl.resolve("bug_fix")
    assert feature["requirement"]["steps"] > bug["requirement"]["steps"]
    assert bug["roles"]["senior_engineer"]["cost_usd"] == Decimal("12")
    assert bl.resolve("no_such_playbook") == feature


def test_the_project_overrides_the_playbook_and_the_requirement_overrides_both_key_by_key():
    project = {"requirement": {"tokens": 1000}, "roles": {"senior_engineer": {"steps": 5}}}
    requirement = {"roles": {"senior_engineer": {"steps": 9}, "tech_lead": {"cost_usd": "1.50"}}}
    limits = bl.resolve("new_feature", project, requirement)
    assert limits["requirement"]["tokens"] == 1000
    assert limits["requirement"]["steps"] == 150  # inherited from the playbook
    assert limits["roles"]["senior_engineer"] == {"steps": 9, "cost_usd": Decimal("30")}
    assert limits["roles"]["tech_lead"] == {"steps": 40, "cost_usd": Decimal("1.50")}


def test_null_means_unlimited_and_overrides_a_default():
    limits = bl.resolve("new_feature", {"requirement": {"cost_usd": None}})
    assert bl.limit_of(limits, "requirement", "cost_usd") is None
    assert bl.limit_of(limits, "role:qc_engineer", "steps") is None  # no limit set anywhere


@pytest.mark.parametrize("budget,problem", [
    ([], "must be an object"),
    ({"requirment": {}}, "unknown key 'requirment'"),
    ({"requirement": {"steps": -1}}, "requirement.steps: expected a whole number"),
    ({"requirement": {"steps": 2.5}}, "requirement.steps: expected a whole number"),
    ({"requirement": {"steps": True}}, "requirement.steps: expected a whole number"),
    ({"requirement": {"cost_usd": "lots"}}, "requirement.cost_usd: expected a number of dollars"),
    ({"requirement": {"cost_usd": "-1"}}, "requirement.cost_usd: expected a number of dollars"),
    ({"requirement": {"minutes": 5}}, "unknown dimension 'minutes'"),
    ({"roles": {"wizard": {"steps": 1}}}, "unknown role 'wizard'"),
    ({"roles": ["senior_engineer"]}, "roles must be an object"),
    ({"roles": {"tech_lead": 3}}, "roles.tech_lead must be an object"),
])
def test_a_malformed_budget_is_refused_with_a_reason(budget, problem):
    found = bl.problems(budget)
    assert any(problem in p for p in found), found
    with pytest.raises(ValueError, match="expected|unknown|must be"):
        bl.normalize(budget)


def test_grace_leaves_room_beyond_what_is_spent():
    assert bl.grace(10, 12) == 17  # spent + half the limit
    assert bl.grace(0, 0) == 1  # at least one step
    assert bl.grace(Decimal("2"), Decimal("2.4")) == Decimal("3.4")


def test_dollars_are_kept_as_strings_in_json():
    budget = bl.normalize({"requirement": {"cost_usd": 3.25, "steps": None}})
    assert bl.as_json(budget) == {"requirement": {"cost_usd": "3.25", "steps": None}, "roles": {}}
