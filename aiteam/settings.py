"""Settings from the environment, with an embedded default that needs no service.

Embedded default (no DATABASE_URL, no CELERY_BROKER_URL, no ANTHROPIC_API_KEY): SQLite,
Celery eager, replay LLM with the bundled cassette, autonomous approvals (logged).
"""
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

from agents.delivery.api import api_url_list, url_list_problems
from aiteam.bindings import ssh_identities, token_env_organizations
from aiteam.env import env_bool, env_choice, env_float, env_int, env_json, env_map, env_rate, env_str
from aiteam.timeouts import StepTimeouts

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("AITEAM_VAR_DIR", str(BASE_DIR / "var")))

# The embedded default's key is public: a deployment (DATABASE_URL set) brings its own or does not start.
_PUBLIC_SECRET_KEY = "insecure-embedded-default-change-me"
SECRET_KEY = env_str("DJANGO_SECRET_KEY") or _PUBLIC_SECRET_KEY
if SECRET_KEY == _PUBLIC_SECRET_KEY and env_str("DATABASE_URL"):
    raise ImproperlyConfigured("DJANGO_SECRET_KEY is not set and DATABASE_URL is: set it to a long random value, e.g. "
                               "DJANGO_SECRET_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(50))') in .env")
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [h for h in env_str("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_celery_beat",
    "axes",
    "lifecycle",
    "agents",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "aiteam.nul_bytes.RefuseNulBytes",  # before anything that looks up a session, a token or a user
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files, before anything that reads a session or a user
    "django.contrib.sessions.middleware.SessionMiddleware",
    "lifecycle.api.errors.CommonMiddleware",  # Django's, with a JSON 404 for a write to an /api/ path without its slash
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires: answers a locked-out login with 429
]

ROOT_URLCONF = "aiteam.urls"
WSGI_APPLICATION = "aiteam.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASE_URL = env_str("DATABASE_URL")


DATABASES = {
    # Persistent connections, checked before reuse: opening one per request costs more than most requests.
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
                                     conn_health_checks=True)
    if DATABASE_URL
    # The embedded default is shared by processes (make serve's web and beat, a command such as aiteam_eval beside
    # them): write-ahead logging lets reads go on during a write, and a transaction that will write takes the lock
    # when it begins (waiting up to 20 s for it) instead of failing with "database is locked" when it first writes.
    else {"ENGINE": "django.db.backends.sqlite3", "NAME": VAR_DIR / "aiteam.sqlite3",
          "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20,
                      "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"}}
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool("DATABASE_PREPARED_STATEMENTS", True):
    # Django's documented options: the server binds parameters, and psycopg prepares a statement a connection
    # runs 5 times (planning is most of what a step's small queries cost). Off behind a transaction-mode pooler.
    DATABASES["default"]["OPTIONS"] = {**DATABASES["default"].get("OPTIONS", {}), "server_side_binding": True,
                                       "prepare_threshold": 5}
if not DATABASE_URL:
    VAR_DIR.mkdir(parents=True, exist_ok=True)  # a fresh clone has no var/: SQLite cannot create its file without it
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [{"NAME": f"django.contrib.auth.password_validation.{name}"} for name in (
    "UserAttributeSimilarityValidator", "MinimumLengthValidator", "CommonPasswordValidator", "NumericPasswordValidator")]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
# WhiteNoise serves static files in every process that serves the app. With DJANGO_STATIC_ROOT set (make serve, the
# image), `collectstatic` writes hashed, compressed copies and their manifest there, and pages link to those (cached
# for good); the web app refuses to start without them (aiteam/startup.py). Unset (tests, a checkout), files are
# served from the apps' own directories under their plain names.
STATIC_COLLECTED = bool(env_str("DJANGO_STATIC_ROOT"))
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT") or VAR_DIR / "static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage" if STATIC_COLLECTED
                    else "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = WHITENOISE_AUTOREFRESH = DEBUG or not STATIC_COLLECTED
LOGIN_URL = "admin:login"

EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")

# --- behind a TLS proxy, abuse limits -----------------------------------------------------
# The one switch for a deployment behind a TLS-terminating proxy that sets X-Forwarded-Proto: cookies over https
# only, HSTS, http redirected to https but for /healthz (container probes speak plain http inside).
AITEAM_BEHIND_TLS_PROXY = env_bool("AITEAM_BEHIND_TLS_PROXY", False)
if AITEAM_BEHIND_TLS_PROXY:
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("AITEAM_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = True
# Proxies whose X-Forwarded-For entry names the client (lifecycle.origin.client_address); with none, a client could
# claim any address to the rate limits and the login lockout.
AITEAM_PROXY_COUNT = env_int("AITEAM_PROXY_COUNT", 1 if AITEAM_BEHIND_TLS_PROXY else 0)
# Rate limits and their counts live in the cache: Redis, shared by every process, when there is one (the broker's
# unless AITEAM_CACHE_URL names another); each process's memory on the embedded default.
AITEAM_CACHE_URL = env_str("AITEAM_CACHE_URL") or (
    env_str("CELERY_BROKER_URL") if env_str("CELERY_BROKER_URL").startswith(("redis://", "rediss://")) else "")
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": AITEAM_CACHE_URL,
                      "KEY_PREFIX": "aiteam-cache"} if AITEAM_CACHE_URL
          else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# Admin login lockout (django-axes, counted in the database): after AITEAM_LOGIN_FAILURE_LIMIT failures for one
# username or from one address, its logins are refused (429) until AITEAM_LOGIN_COOLOFF_MIN minutes pass after the
# last failure; a success clears the count. Django's own backend still checks the password.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("AITEAM_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("AITEAM_LOGIN_COOLOFF_MIN", 15.0))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "lifecycle.origin.client_address"
AXES_VERBOSE = False  # no banner from every process as it starts

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "lifecycle.api.authentication.ApiTokenAuthentication",  # hashed, expiring (ADR 23)
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "lifecycle.api.schema.ApiSchema",
    "DEFAULT_PARSER_CLASSES": ["lifecycle.api.parsers.BoundedJSONParser", "rest_framework.parsers.FormParser",
                               "rest_framework.parsers.MultiPartParser"],
    "EXCEPTION_HANDLER": "lifecycle.api.errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "lifecycle.api.pagination.Pages",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": [f"lifecycle.api.throttles.{name}" for name in (
        "AnonRateThrottle", "UserRateThrottle", "SubmissionRateThrottle")],
    "DEFAULT_THROTTLE_RATES": {"anon": env_rate("AITEAM_THROTTLE_ANON", "60/min"),
                               "user": env_rate("AITEAM_THROTTLE_USER", "600/min"),
                               "submit": env_rate("AITEAM_THROTTLE_SUBMIT", "30/min")},
    "NUM_PROXIES": AITEAM_PROXY_COUNT,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "aiteam API", "VERSION": "1.0.0", "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],  # like every endpoint it describes
    # several models have a `state`: each choice set gets its own name in the schema
    "ENUM_NAME_OVERRIDES": {"RequirementStateEnum": "lifecycle.states.RequirementState",
                            "StoryStateEnum": "lifecycle.states.StoryState",
                            "ReviewStateEnum": "lifecycle.states.ReviewState",
                            "StepStateEnum": "lifecycle.states.StepState",
                            "TicketSourceEnum": "lifecycle.tickets.TicketSource",
                            "PromotionStateEnum": "lifecycle.models.promotions.PromotionDecision.State",
                            "PromotionKindEnum": "lifecycle.models.promotions.PromotionDecision.Kind"},
}

# --- Celery -----------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
EMBEDDED = not CELERY_BROKER_URL
CELERY_TASK_ALWAYS_EAGER = EMBEDDED
CELERY_TASK_EAGER_PROPAGATES = True
if EMBEDDED:
    CELERY_BROKER_URL = "memory://localhost/"
STEP_TIMEOUTS = StepTimeouts.from_env()
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True  # the database is the record of state
CELERY_RESULT_BACKEND = None
CELERY_TASK_SOFT_TIME_LIMIT = STEP_TIMEOUTS.task_soft_limit
CELERY_TASK_TIME_LIMIT = STEP_TIMEOUTS.hard_time_limit
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": STEP_TIMEOUTS.visibility_timeout}
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "lifecycle.runner.run_step": {"queue": "llm"},
    "lifecycle.tasks.answer_message": {"queue": "llm"},  # model calls, as steps
    "lifecycle.tasks.*": {"queue": "default"},
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BEAT_SCHEDULE = {
    "every-10-seconds-reap-expired-steps": {
        "task": "lifecycle.tasks.reap_steps",
        "schedule": env_float("AITEAM_REAPER_INTERVAL_S", 10.0),
    },
    "every-30-seconds-relay-undelivered-outbox-events": {
        "task": "lifecycle.tasks.relay_outbox",
        "schedule": env_float("AITEAM_RELAY_INTERVAL_S", 30.0),
    },
    "every-minute-compare-settled-replays": {
        "task": "lifecycle.tasks.compare_settled_replays",
        "schedule": 60.0,
    },
    "every-minute-requeue-lost-answers": {
        "task": "lifecycle.tasks.requeue_answers",
        "schedule": 60.0,
    },
    "every-day-pm-status-digests": {
        "task": "lifecycle.tasks.refresh_status_digests",
        "schedule": 24 * 3600.0,
    },
    "every-day-conversation-email-digests": {
        "task": "lifecycle.tasks.send_conversation_digests",
        "schedule": crontab(minute=0, hour=env_int("AITEAM_CONVERSATION_DIGEST_HOUR", 7)),  # UTC
    },
}
# Read by Celery's Django fixup from Celery's own conf (see aiteam/celery.py), not from here.
WORKER_DB_REUSE_MAX = env_int("AITEAM_WORKER_DB_REUSE_MAX", 1000)

# --- aiteam -----------------------------------------------------------------------------
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
AITEAM_LLM_PROVIDER = env_str("AITEAM_LLM_PROVIDER", "anthropic" if ANTHROPIC_API_KEY else "replay")
AITEAM_REPLAY_CASSETTE = Path(env_str("AITEAM_REPLAY_CASSETTE", str(BASE_DIR / "agents/cassettes/sample.json")))
AITEAM_REPLAY_LATENCY_MS = env_int("AITEAM_REPLAY_LATENCY_MS", 0)
AITEAM_MODELS = {
    "fast": env_str("AITEAM_MODEL_FAST", "claude-haiku-5-5"),
    "strong": env_str("AITEAM_MODEL_STRONG", "claude-sonnet-5-5"),
}
# Prices that differ from agents/llm/pricing.py's table, or models it lacks (JSON; checked at startup).
AITEAM_PRICES = env_json("AITEAM_PRICES", {})
# Output limit per role (tokens): the engineer rewrites whole files (up to 30 of them in a fix), DevOps writes a
# workflow, a runbook and a rollback; an answer cut off at its limit fails the step (LLMOutputTruncated). A
# call's timeout grows with its limit (agents/llm/anthropic_provider.py). JSON overrides merge in.
AITEAM_MAX_OUTPUT_TOKENS = {"default": 4096, "tech_architect": 8192, "qc_engineer": 8192, "senior_engineer": 16000,
                            "devops_engineer": 16000, **env_json("AITEAM_MAX_OUTPUT_TOKENS", {})}
# Which model class each role uses: classification and review fast, design and code strong.
AITEAM_ROLE_MODELS = {
    "product_owner": "strong",
    "business_analyst": "strong",
    "tech_architect": "strong",
    "senior_engineer": "strong",
    "tech_lead": "fast",
}
# The assistant's model spend per organization over the last 24 hours (ADR 36); calls past it are refused.
AITEAM_ASSISTANT_DAILY_USD = env_float("AITEAM_ASSISTANT_DAILY_USD", 5.0)
AITEAM_AUTONOMOUS = env_bool("AITEAM_AUTONOMOUS", EMBEDDED)
# What autonomous mode does when a budget runs out (lifecycle/services/budget_gate.py); logged as a policy decision.
AITEAM_BUDGET_POLICY = env_choice("AITEAM_BUDGET_POLICY", "terminate", ("terminate", "approve_partial", "override_budget"))
AITEAM_BUDGET_POLICY_MAX_OVERRIDES = env_int("AITEAM_BUDGET_POLICY_MAX_OVERRIDES", 1)
# How long a new API token works (days); tokens are stored hashed and can be revoked in the admin.
AITEAM_TOKEN_TTL_DAYS = env_int("AITEAM_TOKEN_TTL_DAYS", 90)
if AITEAM_TOKEN_TTL_DAYS < 1:
    raise ImproperlyConfigured(f"AITEAM_TOKEN_TTL_DAYS={AITEAM_TOKEN_TTL_DAYS}: expected a whole number of days, 1 or more")
AITEAM_WORKSPACE_ROOT = Path(env_str("AITEAM_WORKSPACE_ROOT", str(VAR_DIR / "workspaces")))
# Which environment variables a project may name as a host token (Project.token_env, settings.jira.token_env),
# comma-separated: NAME=org-slug binds one to that organization (its projects only may name it); a bare NAME goes
# to the first organization whose project names it (aiteam/bindings.py). AITEAM_GITHUB_TOKEN_ENVS is the older
# name, read when this one is not set.
AITEAM_TOKEN_ENVS, AITEAM_TOKEN_ENV_ORGANIZATIONS = token_env_organizations("AITEAM_TOKEN_ENVS", env_map(
    "AITEAM_TOKEN_ENVS", env_str("AITEAM_GITHUB_TOKEN_ENVS", "GITHUB_TOKEN,GITLAB_TOKEN")))
# The ssh key each organization's ssh remotes authenticate with, org-slug=/path/to/key, comma-separated: git's ssh
# uses that key only (no ssh config, agent or default key), and a project whose organization has none cannot use
# an ssh repo_url (docs/adr/0043).
AITEAM_SSH_IDENTITIES = ssh_identities("AITEAM_SSH_IDENTITIES", env_map("AITEAM_SSH_IDENTITIES", values="required"))
# Where a project's pull requests, merge requests and ticket comments may be sent (comma-separated): GitHub API
# URLs, GitLab instances (without /api/v4) and Jira Cloud sites (none by default: each site is its own host).
# https only, but for a loopback address (the local fake host); checked here and again where a URL is used.
# Each normalized as a project's URL is (agents.delivery.api.normalized_api_url: no trailing slash).
AITEAM_GITHUB_API_URLS = api_url_list(env_str("AITEAM_GITHUB_API_URLS", "https://api.github.com"))
AITEAM_GITLAB_URLS = api_url_list(env_str("AITEAM_GITLAB_URLS", "https://gitlab.com"))
AITEAM_JIRA_URLS = api_url_list(env_str("AITEAM_JIRA_URLS"))
for _name, _urls in (("AITEAM_GITHUB_API_URLS", AITEAM_GITHUB_API_URLS), ("AITEAM_GITLAB_URLS", AITEAM_GITLAB_URLS),
                     ("AITEAM_JIRA_URLS", AITEAM_JIRA_URLS)):
    if _bad := url_list_problems(_urls):
        raise ImproperlyConfigured(f"{_name}: {'; '.join(_bad)}")
# An existing repository's cached mirrors, and the environments its tests run in (one venv per dependency-file hash).
AITEAM_MIRROR_ROOT = Path(env_str("AITEAM_MIRROR_ROOT", str(VAR_DIR / "mirrors")))
AITEAM_REPO_INDEX_MAX_MB = env_int("AITEAM_REPO_INDEX_MAX_MB", 256)
AITEAM_ENVIRONMENTS_ROOT = Path(env_str("AITEAM_ENVIRONMENTS_ROOT", str(VAR_DIR / "environments")))
# Where a repository's dependencies are installed from when its environment is built (the preparation step has
# network; the tests run without): a package index ("" for none) and local folders of wheels, comma-separated.
AITEAM_PIP_INDEX_URL = env_str("AITEAM_PIP_INDEX_URL", "https://pypi.org/simple")
AITEAM_PIP_FIND_LINKS = [Path(v.strip()) for v in env_str("AITEAM_PIP_FIND_LINKS").split(",") if v.strip()]
AITEAM_REMOTES_ROOT = Path(env_str("AITEAM_REMOTES_ROOT", str(VAR_DIR / "remotes")))  # embedded default remotes
# Which git remotes a project's repo_url may name (agents/delivery/remotes.py): https or ssh to these hosts, or a
# local path under this root that is the project's own <organization id>/<project id>.git (empty: no local path).
AITEAM_GIT_HOSTS = [v.strip().lower() for v in env_str("AITEAM_GIT_HOSTS", "github.com,gitlab.com").split(",") if v.strip()]
AITEAM_GIT_LOCAL_ROOT = Path(_root) if (_root := env_str("AITEAM_GIT_LOCAL_ROOT", str(AITEAM_REMOTES_ROOT))) else None
# A CA bundle for https remotes on a host with its own CA (self-hosted): git trusts it instead of the system's, for
# the project's remote host only, when the project has a token (agents/delivery/credentials.py).
AITEAM_GIT_CA_FILE = Path(_ca) if (_ca := env_str("AITEAM_GIT_CA_FILE")) else None
AITEAM_MAX_DESIGN_ROUNDS = env_int("AITEAM_MAX_DESIGN_ROUNDS", 3)
AITEAM_MAX_CODE_REVIEW_ROUNDS = env_int("AITEAM_MAX_CODE_REVIEW_ROUNDS", 3)
AITEAM_SANDBOX_TIMEOUT_S = env_float("AITEAM_SANDBOX_TIMEOUT_S", 120.0)
AITEAM_SANDBOX_MEMORY_MB = env_int("AITEAM_SANDBOX_MEMORY_MB", 1024)
# Run generated tests even where neither bubblewrap nor the drop to an unprivileged uid applies (a worker that is not root):
# they then run as the worker's own user and can read its secrets and every tenant's workspace. Off: such a run
# is refused (agents.sandbox.isolation.SandboxUnavailable, an operator's matter). On only for a trusted, single-
# tenant install or a developer's machine: the embedded default is one (`make demo` as a non-root user).
AITEAM_SANDBOX_ALLOW_UNISOLATED = env_bool("AITEAM_SANDBOX_ALLOW_UNISOLATED", EMBEDDED)
AITEAM_BRIEF_MAX_CHARS = 20_000
# Incoming ticket webhooks (/webhooks/<source>/<project id>/): the environment variables a project may name as a
# webhook's shared secret (none: webhooks are off), and the largest body read (a bigger one is a 413, unread).
AITEAM_WEBHOOK_SECRET_ENVS = [v.strip() for v in env_str("AITEAM_WEBHOOK_SECRET_ENVS").split(",") if v.strip()]
AITEAM_WEBHOOK_MAX_BYTES = env_int("AITEAM_WEBHOOK_MAX_BYTES", 1_048_576)
# Slack (docs/configuration.md "Slack"): the operator's Slack app. Its signing secret is read from the variable
# AITEAM_SLACK_SIGNING_SECRET_ENV names (unset: /webhooks/slack/ refuses everything); each workspace's bot token
# from a variable on AITEAM_SLACK_TOKEN_ENVS, named by its SlackWorkspace row. Requests signed more than
# AITEAM_SLACK_MAX_AGE_S ago are refused (a replayed request).
AITEAM_SLACK_SIGNING_SECRET_ENV = env_str("AITEAM_SLACK_SIGNING_SECRET_ENV", "SLACK_SIGNING_SECRET")
AITEAM_SLACK_TOKEN_ENVS = [v.strip() for v in env_str("AITEAM_SLACK_TOKEN_ENVS", "SLACK_BOT_TOKEN").split(",") if v.strip()]
AITEAM_SLACK_API_URL = env_str("AITEAM_SLACK_API_URL", "https://slack.com/api").rstrip("/")
if _bad := url_list_problems([AITEAM_SLACK_API_URL]):
    raise ImproperlyConfigured(f"AITEAM_SLACK_API_URL: {'; '.join(_bad)}")
AITEAM_SLACK_MAX_AGE_S = env_int("AITEAM_SLACK_MAX_AGE_S", 300)
AITEAM_JSON_MAX_DEPTH = env_int("AITEAM_JSON_MAX_DEPTH", 32)  # deeper API request bodies are a 400
AITEAM_MAX_STORY_ROUNDS = env_int("AITEAM_MAX_STORY_ROUNDS", 3)
AITEAM_STEP_MAX_RUNS = env_int("AITEAM_STEP_MAX_RUNS", 3)
AITEAM_STEP_STALE_QUEUED_S = env_float("AITEAM_STEP_STALE_QUEUED_S", 300.0)  # above a normal queue wait
AITEAM_REVIEW_SLA_HOURS = {"stories_approval": 24, "clarification": 24, "step_failed": 4, "escalation": 8}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "agents.llm.redact.RedactingFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"], "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("AITEAM_LOG_LEVEL", "INFO")},
    # Celery's "Task … succeeded" lines say nothing when the steps run in this process (the embedded default); a
    # worker's log keeps them.
    "loggers": {"httpx": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}, "anthropic": {"level": "INFO"},
                **({"celery.app.trace": {"level": "WARNING"}} if EMBEDDED else {})},
}

# --- review inbox, SLA, notifications ---
# SLA hours per review kind; a project overrides them (and the policies below) in
# Project.settings["review_policies"] = {"<kind>" or "*": {"sla_hours": 8, "action": "escalate", …}}.
AITEAM_REVIEW_SLA_HOURS = {"design_review": 24, "code_review": 24, "deployment_approval": 4, "budget_exhausted": 8,
                           **AITEAM_REVIEW_SLA_HOURS}
# What happens when a task is overdue (lifecycle/services/sla_policies.py documents every field). Whatever the
# action, after decide_after_hours the stated default_decision is applied and marked as a policy decision; a
# deployment is never decided by policy: then it is escalated and waits for a person.
AITEAM_REVIEW_POLICIES = {
    "*": {"action": "remind", "remind_every_hours": 4, "decide_after_hours": 72, "default_decision": "reject"},
    "step_failed": {"action": "escalate", "remind_every_hours": 2, "decide_after_hours": 24},
    "escalation": {"action": "escalate", "remind_every_hours": 2, "decide_after_hours": 48},
    "deployment_approval": {"action": "escalate", "remind_every_hours": 1, "decide_after_hours": 24},
    "budget_exhausted": {"action": "escalate", "remind_every_hours": 2, "decide_after_hours": 48},  # reject = terminate
}
# The sweep runs every minute as the django-celery-beat PeriodicTask "every-minute-sweep-review-slas", created by
# migration lifecycle 0004 and edited in the admin (Periodic tasks). It is deliberately not in CELERY_BEAT_SCHEDULE:
# the DatabaseScheduler update_or_creates those entries on every start, which would undo an edit made in the admin.
AITEAM_SLA_SWEEP_BATCH = env_int("AITEAM_SLA_SWEEP_BATCH", 1000)
# Where links in notifications point.
AITEAM_PUBLIC_URL = env_str("AITEAM_PUBLIC_URL", "http://localhost:8000").rstrip("/")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "aiteam <aiteam@localhost>")
# Channels: e-mail to the people concerned (users without an address are skipped) and a Slack-compatible
# incoming webhook (this URL, or a project's settings["notifications"]["webhook_url"]). The URL is a secret.
AITEAM_NOTIFY_CHANNELS = [c for c in env_str("AITEAM_NOTIFY_CHANNELS", "email,webhook").split(",") if c]
AITEAM_NOTIFY_WEBHOOK_URL = env_str("AITEAM_NOTIFY_WEBHOOK_URL")
# The operator's URL above may point anywhere; a project's URL (tenant input) must resolve to public addresses
# unless this is set (a single-tenant install whose organization admins are its operators).
AITEAM_NOTIFY_ALLOW_PRIVATE_WEBHOOKS = env_bool("AITEAM_NOTIFY_ALLOW_PRIVATE_WEBHOOKS", False)
AITEAM_NOTIFY_TIMEOUT_S = env_float("AITEAM_NOTIFY_TIMEOUT_S", 5.0)  # a webhook send's total deadline
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0)  # SMTP socket timeout: a send must end well inside its claim
AITEAM_NOTIFY_MAX_ATTEMPTS = env_int("AITEAM_NOTIFY_MAX_ATTEMPTS", 6)
# a relayed event whose notifications were not worked out after this long is queued again (the beat, every minute)
AITEAM_NOTIFY_LOST_AFTER_S = env_int("AITEAM_NOTIFY_LOST_AFTER_S", 120)
AITEAM_NOTIFY_BACKOFF_S = env_float("AITEAM_NOTIFY_BACKOFF_S", 30.0)  # doubles per attempt, at most an hour
