"""System checks: refuse to start with step time budgets out of order."""
from django.conf import settings
from django.core.checks import Error, register


@register()
def step_timeouts_in_order(app_configs, **kwargs):
    return [Error(p, id="aiteam.E001") for p in settings.STEP_TIMEOUTS.problems()]
