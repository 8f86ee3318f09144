"""System checks: refuse to start with step time budgets out of order, bad review policies, or a model
without a price; warn about stored git remotes the operator's rule refuses, ssh keys ssh could not use, and a real
model on the embedded default (no workers)."""
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DatabaseError

from agents.delivery.remotes import ssh_key_file_problem


@register()
def step_timeouts_in_order(app_configs, **kwargs):
    return [Error(p, id="aiteam.E001") for p in settings.STEP_TIMEOUTS.problems()]


@register()
def review_policies_valid(app_configs, **kwargs):
    from lifecycle.services.sla_policies import policy_problems

    return [Error(f"AITEAM_REVIEW_POLICIES: {p}", id="aiteam.E002") for p in policy_problems()]


@register()
def models_priced(app_configs, **kwargs):
    from agents.llm.pricing import price_of, price_problems

    problems = price_problems(settings.AITEAM_PRICES)
    if not problems:
        problems = [f"AITEAM_MODELS[{name!r}] = {model!r} has no price: add it to AITEAM_PRICES"
                    for name, model in settings.AITEAM_MODELS.items() if price_of(model) is None]
    return [Error(p, id="aiteam.E003") for p in problems]


@register()
def output_limits_valid(app_configs, **kwargs):
    limits = settings.AITEAM_MAX_OUTPUT_TOKENS
    bad = [f"{role}={value!r}" for role, value in limits.items() if type(value) is not int or value < 1]
    return [Error(f"AITEAM_MAX_OUTPUT_TOKENS: each limit is a positive whole number of tokens: {', '.join(bad)}",
                  id="aiteam.E004")] if bad else []


@register()
def ssh_keys_usable(app_configs, **kwargs):
    """A bound key that is missing or unreadable fails only its organization's ssh remotes, at their first fetch:
    said at start instead, as a warning, since every other organization's work goes on (never the key's content)."""
    found = [(slug, path, problem) for slug, path in settings.AITEAM_SSH_IDENTITIES.items()
             if (problem := ssh_key_file_problem(path))]
    return [Warning(f"AITEAM_SSH_IDENTITIES: {slug}={path}: the key file {problem}; the ssh remotes of organization "
                    f"{slug!r} fail until it is fixed",
                    hint="give the worker's user the key (mode 600) or remove the entry; docs/operations.md, Delivery",
                    id="aiteam.W003") for slug, path, problem in found]


@register()
def model_beside_broker(app_configs, **kwargs):
    """On the embedded default every step runs inside the request that set it off (eager Celery): with a real model
    a request waits for its answers, past the web server's limit (gunicorn's 30 s), and fails without them."""
    if settings.CELERY_BROKER_URL or settings.AITEAM_LLM_PROVIDER == "replay":
        return []
    return [Warning(f"AITEAM_LLM_PROVIDER={settings.AITEAM_LLM_PROVIDER} with no CELERY_BROKER_URL: the web app runs "
                    "each step inside the request that set it off, and a model's answers outlast the web server's "
                    "30 s request limit (the request fails; beat's reaper runs the step again later)",
                    hint="set CELERY_BROKER_URL and run the workers (make serve starts them: docs/operations.md); "
                    "commands such as aiteam_demo and aiteam_ticket are not limited",
                    id="aiteam.W004")]


@register(Tags.database)
def repo_urls_allowed(app_configs, databases=None, **kwargs):
    """A repo_url saved before the rule, or before the operator narrowed AITEAM_GIT_HOSTS: delivery refuses it.
    Reads rows, so only when asked to (`migrate`, `check --database default`), like Django's own database checks."""
    from lifecycle.models import Project
    from lifecycle.services.repositories import tenant_remote

    if "default" not in (databases or ()):
        return []
    try:
        projects = list(Project.objects.exclude(repo_url="").select_related("organization").order_by("pk"))
    except DatabaseError:  # not migrated yet: nothing stored to check
        return []
    refused = [(p, reason) for p in projects if (reason := tenant_remote(p, p.repo_url).refusal())]
    return [Warning(f"project {p} (id {p.pk}): repo_url {reason}; delivery refuses it until an admin of its "
                    "organization changes it", hint="docs/operations.md, Delivery: which remotes are allowed",
                    obj=p, id="aiteam.W001") for p, reason in refused]


@register(Tags.database)
def secret_variables_allowed(app_configs, databases=None, **kwargs):
    """A token or webhook secret variable saved before the operator narrowed AITEAM_TOKEN_ENVS or
    AITEAM_WEBHOOK_SECRET_ENVS: delivery and the webhook refuse it until an admin changes it."""
    from lifecycle.models import Project
    from lifecycle.repo_settings import secret_variable_problems

    if "default" not in (databases or ()):
        return []
    try:
        projects = list(Project.objects.select_related("organization").order_by("pk"))
    except DatabaseError:  # not migrated yet: nothing stored to check
        return []
    return [Warning(f"project {p} (id {p.pk}): {problem}", hint="docs/configuration.md: the repository connection",
                    obj=p, id="aiteam.W002") for p in projects for problem in secret_variable_problems(p)]
