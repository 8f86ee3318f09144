"""System checks: refuse to start with step time budgets out of order."""
from django.conf import settings
from django.core.checks import Error, register


@register()
def step_timeouts_in_order(app_configs, **kwargs):
    return [Error(p, id="aiteam.E001") for p in settings.STEP_TIMEOUTS.problems()]


@register()
def review_policies_valid(app_configs, **kwargs):
    from lifecycle.services.sla_policies import policy_problems

    return [Error(f"AITEAM_REVIEW_POLICIES: {p}", id="aiteam.E002") for p in policy_problems()]
