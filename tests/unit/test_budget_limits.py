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


@pytest.mark.parametrize("budget,problem", [
    ({"requirement": {"cost_usd": "1e22"}}, "requirement.cost_usd: at most 1000000 dollars (null: unlimited), got '1e22'"),
    ({"requirement": {"cost_usd": 1e22}}, "requirement.cost_usd: at most 1000000 dollars"),
    ({"requirement": {"cost_usd": 10**40}}, "requirement.cost_usd: at most 1000000 dollars (null: unlimited), got 1.000E+40"),
    ({"requirement": {"cost_usd": "1000000.000001"}}, "requirement.cost_usd: at most 1000000 dollars"),
    ({"requirement": {"tokens": 10**40}}, "requirement.tokens: at most 10000000000 tokens (null: unlimited), got 1.000E+40"),
    ({"requirement": {"steps": 100_001}}, "requirement.steps: at most 100000 steps"),
    ({"roles": {"sandbox": {"sandbox_runs": 10**6}}}, "roles.sandbox.sandbox_runs: at most 100000 sandbox runs"),
    ({"roles": {"senior_engineer": {"cost_usd": "9" * 5000}}}, "roles.senior_engineer.cost_usd: at most 1000000 dollars"),
    ({"requirement": {"cost_usd": "0.0000001"}}, "requirement.cost_usd: at most 6 decimal places"),
    ({"requirement": {"cost_usd": 1e-7}}, "requirement.cost_usd: at most 6 decimal places"),
])
def test_a_limit_beyond_its_maximum_is_refused_naming_the_field_and_the_maximum(budget, problem):
    found = bl.problems(budget)
    assert len(found) == 1 and found[0].startswith(problem), found
    assert len(found[0]) < 160  # what was sent is quoted short, however long it was
    assert bl.shape_problems(budget) == []  # stored before the bounds, it is still readable


@pytest.mark.parametrize("dimension,value", [
    ("cost_usd", "NaN"), ("cost_usd", "sNaN"), ("cost_usd", "Infinity"), ("cost_usd", "-Infinity"),
    ("cost_usd", float("nan")), ("cost_usd", float("inf")), ("cost_usd", "-1e-9"), ("cost_usd", True),
    ("cost_usd", False), ("cost_usd", {"amount": 5}), ("cost_usd", [5]), ("cost_usd", ""), ("cost_usd", "1 2"),
    ("tokens", "5"), ("tokens", 5.0), ("tokens", True), ("tokens", -(10**40)), ("tokens", {"n": 1}),
    ("tokens", "1E+5"), ("steps", [1]),
])
def test_what_is_not_a_limit_is_refused_as_such(dimension, value):
    found = bl.problems({"roles": {"tech_lead": {dimension: value}}})
    assert len(found) == 1 and found[0].startswith(f"roles.tech_lead.{dimension}: expected "), found
    with pytest.raises(ValueError, match="expected"):
        bl.normalize({"roles": {"tech_lead": {dimension: value}}})


def test_limits_at_the_edges_are_taken_and_written_plainly():
    budget = {"requirement": {"cost_usd": "1E+5", "tokens": 10**10, "steps": 0, "sandbox_runs": 100_000},
              "roles": {"tech_lead": {"cost_usd": "-0"}, "qc_engineer": {"cost_usd": "1.5000000"},
                        "senior_engineer": {"cost_usd": "1000000"}, "devops_engineer": {"cost_usd": "0.000001"}}}
    assert bl.problems(budget) == []
    typed = bl.normalize(budget)
    assert typed["requirement"] == {"cost_usd": Decimal(100_000), "tokens": 10**10, "steps": 0, "sandbox_runs": 100_000}
    stored = bl.as_json(typed)
    assert stored["requirement"]["cost_usd"] == "100000"  # never "1E+5"
    assert stored["roles"]["tech_lead"] == {"cost_usd": "0"}  # never "-0"
    assert stored["roles"]["qc_engineer"] == {"cost_usd": "1.500000"}  # trailing zeros are not finer than a millionth
    assert stored["roles"]["devops_engineer"] == {"cost_usd": "0.000001"}
    assert bl.problems(stored) == []


def test_a_stored_limit_beyond_its_maximum_is_read_as_the_maximum():
    """Written before the bounds (or by hand in the database): reading it never fails, and never lifts the cap."""
    stored = {"requirement": {"cost_usd": "1e22", "tokens": 10**40, "steps": 10**9},
              "roles": {"tech_lead": {"cost_usd": "0.0000001", "sandbox_runs": 10**12}}}
    limits = bl.resolve("new_feature", None, stored)
    assert limits["requirement"] == {"cost_usd": bl.MAXIMUM["cost_usd"], "tokens": 10**10, "steps": 100_000,
                                     "sandbox_runs": 40}
    assert limits["roles"]["tech_lead"] == {"steps": 40, "cost_usd": Decimal("0.000001"), "sandbox_runs": 100_000}
    assert bl.problems(bl.as_json(limits)) == []


def test_a_grace_stays_within_the_maximum_and_to_the_millionth():
    assert bl.grace(10**10, 10**10, "tokens") == 10**10
    assert bl.grace(10**10 - 1, 10**10 - 1) == 10**10 - 1 + 5 * 10**9  # whole numbers, exact
    assert bl.grace(Decimal("1000000"), Decimal("999999"), "cost_usd") == Decimal("1000000")
    assert bl.grace(Decimal("1.000001"), Decimal("1.000001"), "cost_usd") == Decimal("1.500002")  # rounded up
    assert bl.problems({"requirement": {"cost_usd": str(bl.grace(Decimal("1.000001"), Decimal("1"), "cost_usd"))}}) == []


def test_every_playbooks_defaults_are_within_the_bounds():
    for playbook in bl.PLAYBOOK_DEFAULTS:
        assert bl.problems(bl.as_json(bl.defaults_for(playbook))) == []
