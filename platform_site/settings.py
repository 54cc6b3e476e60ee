"""The platform's one settings file, driven by environment variables.

Two running modes share this file:

* Embedded (default): SQLite, an in-process Celery worker and beat on the memory broker,
  and the in-memory channel layer. Nothing to install.
* Distributed: set ``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL``; Celery and Channels then
  use Redis, and daphne / celery worker / celery beat run as separate processes.

Every setting named in DESIGN.md is read from the environment variable of the same name.
Bad values fail loudly at start.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from platform_site.env import (
    INSECURE_SECRET_KEY,
    check_mode,
    envbool,
    envchoice,
    envfernetkeys,
    envfloat,
    envhosts,
    envint,
    envrate,
    envredisurl,
    envstr,
    postgres_database,
)

BASE_DIR = Path(__file__).resolve().parent.parent


DEBUG = envbool("DEBUG", False)
# Unset in the distributed mode: a warning at every start (platform_site/deploy_checks.py).
SECRET_KEY = envstr("SECRET_KEY") or INSECURE_SECRET_KEY
# API keys and user tokens are stored as HMAC-SHA256 digests keyed with this pepper.
API_KEY_PEPPER = envstr("API_KEY_PEPPER") or SECRET_KEY

DATABASE_URL = envstr("DATABASE_URL")
REDIS_URL = envredisurl("REDIS_URL")
check_mode(DATABASE_URL, REDIS_URL)  # no REDIS_URL without DATABASE_URL
DISTRIBUTED = bool(DATABASE_URL and REDIS_URL)
EMBEDDED = not DISTRIBUTED

HOST = envstr("HOST", "127.0.0.1")
PORT = envint("PORT", 8000)
PUBLIC_URL = (envstr("PUBLIC_URL") or f"http://{HOST}:{PORT}").rstrip("/")

ALLOWED_HOSTS = envhosts("ALLOWED_HOSTS", "*")  # /healthz, /readyz, /metrics: any Host
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in envstr("CSRF_TRUSTED_ORIGINS", PUBLIC_URL).split(",") if o.strip()
]
# Reverse proxies in front of daphne: throttles and the login lockout then key on the real
# client address from X-Forwarded-For (platform_site.clientip). Unset: the socket's peer.
NUM_PROXIES = envint("NUM_PROXIES", 0, minimum=0) if os.environ.get("NUM_PROXIES") else None
# An https PUBLIC_URL means TLS ends before daphne (a TLS-terminating proxy, as deploy/
# sets it up): the admin's session and CSRF cookies then never travel over plain http.
# The embedded default (http://127.0.0.1:8000) keeps them plain, or no login would stick.
PUBLIC_URL_HTTPS = PUBLIC_URL.lower().startswith("https://")
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", PUBLIC_URL_HTTPS)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", PUBLIC_URL_HTTPS)
# Behind such a proxy daphne sees plain http: the proxy's X-Forwarded-Proto says what the
# client used, so links built from a request (the API's pagination ``next``) stay on https
# and a client following them never sends its token in clear. Trusted only when the
# operator says a proxy is in front (an https PUBLIC_URL, or NUM_PROXIES): that proxy sets
# the header, replacing whatever a client sent.
USE_X_FORWARDED_PROTO = envbool("USE_X_FORWARDED_PROTO", PUBLIC_URL_HTTPS or bool(NUM_PROXIES))
if USE_X_FORWARDED_PROTO:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# An https-only site can say so (check --deploy's W004 and W008). Off by default: HSTS is
# remembered by browsers for its whole lifetime, and a redirect needs the proxy's scheme
# header (above) or every request would redirect again. Health and metrics stay plain, as
# load balancers and scrapers on the host probe them over http.
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", False)
# The proxy's own check of /readyz is plain http too: a 301 would count as healthy.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
if SECURE_SSL_REDIRECT and not USE_X_FORWARDED_PROTO:
    raise ImproperlyConfigured(
        "SECURE_SSL_REDIRECT needs USE_X_FORWARDED_PROTO: daphne sees plain http behind the "
        "TLS proxy, so without the proxy's header every request would be redirected again."
    )

INSTALLED_APPS = [
    "daphne",
    # Before the admin: its templates (admin/base_site.html, the dashboard) override the
    # admin's own.
    "platform_site",
    # django.contrib.admin, whose site checks an action's selected ids (a 500 otherwise).
    "platform_site.admin_site.PlatformAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "agent_profiles",
    "a2a",
    "gateway",
    # Admin login lockout (django-axes): failed attempts per user and address.
    "axes",
]

MIDDLEWARE = [
    # First: /healthz, /readyz and /metrics answer whatever the Host header (a probe on
    # the host names an address, not a name in ALLOWED_HOSTS); see the module.
    "platform_site.probe_hosts.ProbeMiddleware",
    # Then: refuse oversize /api/ bodies before anything reads them.
    "platform_site.middleware.BodyLimitMiddleware",
    # Then: refuse NUL / lone surrogates in /api/ paths and query strings (platform_site.text).
    "platform_site.middleware.TextRuleMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Serves the admin's and the API docs' static files from the app itself: `make run`
    # needs no web server and no collectstatic.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last (as django-axes asks): answers a locked-out login with 429.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "platform_site.urls"
ASGI_APPLICATION = "platform_site.asgi.application"
WSGI_APPLICATION = "platform_site.wsgi.application"

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
            ],
        },
    },
]

# Seconds to open a PostgreSQL connection: a server that accepts the TCP connection and
# then says nothing (stopped, or a black-holed path) held each request, /readyz and
# /metrics for ever (libpq waits without end by default).
DATABASE_CONNECT_TIMEOUT = envint("DATABASE_CONNECT_TIMEOUT", 5, positive=True)
if DATABASE_URL:
    # PostgreSQL only; a refusal names the scheme, never the URL (it may carry the password).
    DATABASES = {"default": postgres_database("DATABASE_URL", DATABASE_URL, conn_max_age=60)}
    # psycopg passes it to libpq; the URL's own ?connect_timeout= wins.
    DATABASES["default"]["OPTIONS"] = {
        "connect_timeout": DATABASE_CONNECT_TIMEOUT,
        **DATABASES["default"].get("OPTIONS", {}),
    }
    if envbool("DATABASE_PREPARED_STATEMENTS", True):
        # The same few statements run for every task: prepared once per connection
        # (psycopg prepares one after its fifth run), PostgreSQL skips parsing and
        # planning them. Measured on instant tasks: 2.8-4.6 -> 1.8-2.5 ms of PostgreSQL
        # CPU per task. Off for a pooler that cannot keep prepared statements (PgBouncer
        # in transaction mode before 1.21), which is why Django leaves them off by default.
        # Options in the URL's query string (``?sslmode=require``) are kept.
        DATABASES["default"]["OPTIONS"] = {
            "server_side_binding": True,
            "prepare_threshold": 5,
            **DATABASES["default"].get("OPTIONS", {}),
        }
else:
    SQLITE_PATH = envstr("SQLITE_PATH") or str(BASE_DIR / "db.sqlite3")
    DATABASES = {
        "default": {
            "ENGINE": "platform_site.sqlite",  # Django's, see platform_site/sqlite/base.py
            "NAME": SQLITE_PATH,
            # Request threads and the in-process worker share one file: WAL lets readers run
            # beside a writer, IMMEDIATE takes the write lock up front (no upgrade deadlock)
            # and the busy timeout waits instead of raising "database is locked".
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": (
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;"
                ),
            },
            # A file, not memory: end-to-end tests share the test database with the
            # platform processes they start.
            "TEST": {"NAME": envstr("SQLITE_TEST_PATH") or str(BASE_DIR / ".test-db.sqlite3")},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Login lockout (django-axes) --------------------------------------------------------
# The admin login: after AXES_FAILURE_LIMIT failed attempts for one username from one
# address, or from one address for any usernames, further attempts answer 429 until
# AXES_COOLOFF_TIME (hours) passes without a failure or an operator unlocks it (admin:
# Axes → Access attempts: delete the row; or `manage.py axes_reset`). Attempts live in the
# database, so every daphne process shares them. A user name alone is never locked: anyone
# could otherwise lock the operators out.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out request
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = envbool("AXES_ENABLED", True)
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", 5, positive=True)
# In hours: axes subtracts it from now, and 1e8 hours (under the seconds bound) made every
# login a 500. Ten years at most.
AXES_COOLOFF_TIME = envfloat("AXES_COOLOFF_TIME", 0.25, minimum=0, maximum=87_600)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_RESET_ON_SUCCESS = True
# The client address as the throttles see it (NUM_PROXIES trusted proxies in front).
AXES_CLIENT_IP_CALLABLE = "platform_site.clientip.client_ip"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# Times with seconds everywhere in the admin (platform_site/formats/en/formats.py).
FORMAT_MODULE_PATH = ["platform_site.formats"]

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# Serve straight from the apps' static folders when STATIC_ROOT was not collected
# (`make run` does not collect; a production install may run collectstatic).
WHITENOISE_USE_FINDERS = True
warnings.filterwarnings("ignore", message=r"No directory at: .*staticfiles", category=UserWarning)

# Request bodies larger than this are refused with 413 (REST) or the A2A error shape.
MAX_BODY_BYTES = envint("MAX_BODY_BYTES", 1_000_000, positive=True)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_BODY_BYTES
# A connection (HTTP or WebSocket) whose client has taken none of what it was sent for this
# many seconds is closed, like a proxy's send timeout (platform_site/send_stall.py); 0: never.
SEND_STALL_TIMEOUT = envfloat("SEND_STALL_TIMEOUT", 60.0, minimum=0)
# Receiving a request (platform_site/request_limits.py): its headers within this many
# seconds of its first byte (a new connection's first request: of the connection's opening),
# its body within REQUEST_BODY_TIMEOUT seconds of the headers plus a second per
# REQUEST_BODY_MIN_RATE bytes received; past either the connection is closed. 0: no limit.
REQUEST_HEADER_TIMEOUT = envfloat("REQUEST_HEADER_TIMEOUT", 30.0, minimum=0)
REQUEST_BODY_TIMEOUT = envfloat("REQUEST_BODY_TIMEOUT", 30.0, minimum=0)
REQUEST_BODY_MIN_RATE = envint("REQUEST_BODY_MIN_RATE", 1000, minimum=0)
# A keep-alive connection waiting for its next request is closed after this many seconds
# (longer than a proxy's idle upstream connections: nginx keeps them 60 s). 0: Twisted's 12 h.
HTTP_KEEPALIVE_TIMEOUT = envfloat("HTTP_KEEPALIVE_TIMEOUT", 75.0, minimum=0)

# --- REST API -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agent_profiles.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON only: the browsable API's HTML page (Accept: text/html) is no answer the OpenAPI
    # schema describes, and scripts and generated clients read JSON. An Accept header JSON
    # cannot satisfy is the 406 the schema documents, in the error shape.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON with a nesting limit and no NUL / lone surrogates (platform_site.text).
    "DEFAULT_PARSER_CLASSES": ["platform_site.parsers.BoundedJSONParser"],
    "EXCEPTION_HANDLER": "platform_site.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # offset=null, limit=-1 or an offset past bigint are a 400, not silently the default.
    "DEFAULT_PAGINATION_CLASS": "platform_site.pagination.StrictLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_RATES": {"registration": envrate("REGISTRATION_THROTTLE", "30/min")},
    "NUM_PROXIES": NUM_PROXIES,  # see NUM_PROXIES above
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "A2A agent platform API",
    "DESCRIPTION": "Registry, platform tasks and operations. The A2A face lives under /v1/a2a.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI and Redoc assets come from drf-spectacular-sidecar, served locally.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Every answer documented (errors, outages) and the text rule in the schema.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "platform_site.openapi.document_errors_and_text_rule",
    ],
}

# --- Registry -------------------------------------------------------------------------
# open: anyone may register a new agent; token: the X-Registration-Token header must match
# REGISTRATION_TOKEN; approval: new agents start disabled until a staff user approves them.
REGISTRATION_MODE = envchoice(
    "REGISTRATION_MODE", "open" if EMBEDDED else "approval", {"open", "token", "approval"}
)
REGISTRATION_TOKEN = envstr("REGISTRATION_TOKEN")
if REGISTRATION_MODE == "token" and not REGISTRATION_TOKEN:
    raise ImproperlyConfigured("REGISTRATION_MODE=token needs REGISTRATION_TOKEN")
EXAMPLE_SKILLS_FILE = BASE_DIR / "agent_profiles" / "fixtures" / "example_skills.json"

# Outbound URLs (agent endpoints, push webhooks) to private, loopback or link-local
# addresses are refused unless allowed. The embedded default allows loopback so the
# reference agent works on one laptop.
ALLOW_PRIVATE_URLS = envbool("ALLOW_PRIVATE_URLS", False)
ALLOW_LOOPBACK_URLS = envbool("ALLOW_LOOPBACK_URLS", EMBEDDED)
# Agents' cards, credentials and health (docs/registry.md).
# Fernet key(s) for agents' credentials at rest, comma-separated (the first encrypts, all
# decrypt: rotation). Unset: derived from SECRET_KEY. Each key is checked here.
CREDENTIALS_KEY = envfernetkeys("CREDENTIALS_KEY")
AGENT_CARD_TIMEOUT = envfloat("AGENT_CARD_TIMEOUT", 5.0, positive=True)  # seconds per card request
AGENT_CARD_MAX_BYTES = envint("AGENT_CARD_MAX_BYTES", 512_000, positive=True)
# One agent's answer, or one stream event.
AGENT_ANSWER_MAX_BYTES = envint("AGENT_ANSWER_MAX_BYTES", 10_000_000, positive=True)
# All of a task's artifacts, however they came (appended chunks of a stream or of pushes).
TASK_ARTIFACTS_MAX_BYTES = envint("TASK_ARTIFACTS_MAX_BYTES", 10_000_000, positive=True)
# Messages an agent may push into one task's conversation; more are refused (409).
TASK_AGENT_MESSAGES_MAX = envint("TASK_AGENT_MESSAGES_MAX", 1000, minimum=0)
AGENT_CARD_RETRY_SECONDS = envfloat("AGENT_CARD_RETRY_SECONDS", 30.0, minimum=0)
AGENT_CARD_REFRESH_INTERVAL = envfloat("AGENT_CARD_REFRESH_INTERVAL", 3600.0, minimum=0)  # 0: never
AGENT_HEALTH_INTERVAL = envfloat("AGENT_HEALTH_INTERVAL", 60.0, minimum=0)  # 0: no health checks
AGENT_HEALTH_TIMEOUT = envfloat("AGENT_HEALTH_TIMEOUT", 5.0, positive=True)

# --- Dispatch -------------------------------------------------------------------------
A2A_POLL_INTERVAL = envfloat("A2A_POLL_INTERVAL", 0.5, minimum=0)  # seconds, first poll
A2A_POLL_INTERVAL_MAX = envfloat("A2A_POLL_INTERVAL_MAX", 10.0, minimum=0)  # most between two polls
# Poll backoff: a factor on the time a task stayed unchanged.
A2A_POLL_BACKOFF = envfloat("A2A_POLL_BACKOFF", 1.5, minimum=0)
A2A_TASK_TIMEOUT = envfloat("A2A_TASK_TIMEOUT", 300.0, positive=True)  # overall seconds per task
# Days a task is kept after it ended (COMPLETED, FAILED, CANCELED, REJECTED); then beat
# deletes it with its events and messages (a2a.retention). 0: kept forever.
TASK_RETENTION_DAYS = max(0.0, envfloat("TASK_RETENTION_DAYS", 0.0, maximum=36_500))  # days
A2A_HTTP_TIMEOUT = envfloat("A2A_HTTP_TIMEOUT", 10.0, positive=True)  # one HTTP call to an agent
A2A_CONNECT_TIMEOUT = envfloat("A2A_CONNECT_TIMEOUT", 3.0, positive=True)
# Sends per task for transient errors.
A2A_MAX_ATTEMPTS = envint("A2A_MAX_ATTEMPTS", 3, positive=True)
A2A_RETRY_BACKOFF = envfloat("A2A_RETRY_BACKOFF", 2.0, minimum=0)  # seconds, doubled per attempt
A2A_LEASE_SECONDS = envfloat("A2A_LEASE_SECONDS", 30.0, positive=True)  # a claimed task's lease
# Due sends/cancels/follows claimed per sweep.
A2A_POLL_BATCH = envint("A2A_POLL_BATCH", 50, positive=True)
# Polls: the batched engine (a2a/engine.py) claims this many per batch, up to
# A2A_POLL_SWEEP_MAX per sweep, at most A2A_AGENT_POLL_RATE per agent and second (a
# budget of rate x A2A_SWEEP_INTERVAL per sweep, over all its batches).
A2A_POLL_ENGINE_BATCH = envint("A2A_POLL_ENGINE_BATCH", 200, positive=True)
A2A_POLL_SWEEP_MAX = envint("A2A_POLL_SWEEP_MAX", 2000, positive=True)
A2A_AGENT_POLL_RATE = envfloat("A2A_AGENT_POLL_RATE", 100.0, positive=True)
# Sends to one agent at once, per process.
A2A_AGENT_SENDS_IN_FLIGHT = envint("A2A_AGENT_SENDS_IN_FLIGHT", 16, minimum=0)
A2A_POLL_CONCURRENCY = envint("A2A_POLL_CONCURRENCY", 16, positive=True)
# Embedded mode: threads of the platform process that act on a task at once after a change
# (a new task, a reply, a cancel: a2a.local_dispatch). On 2 CPUs 16 took CPU from the
# requests (face message:send 0.36x of a plain a2a-sdk server, 0.55x with 4); since the
# sweep stopped racing new tasks' hints, 4 left new tasks queueing under load (dispatch
# p50 132 ms, 52-57 ms with 8, the face's rate the same).
A2A_EMBEDDED_THREADS = envint("A2A_EMBEDDED_THREADS", 8, positive=True)
# Distributed: immediate hints go to the workers through one Redis list instead of a
# Celery message each (a2a.hint_queue); each worker process starts them on this many
# threads of its own (each with a database connection). Its threads wait on the agent and
# on PostgreSQL about equally: with 4, one worker process started instant tasks at
# 250-291/s while creations came at 350-410/s (p50 2.6-4.0 s); 8 gave 269-306/s (p50
# 1.4-2.3 s), 16 no more tasks than 8 on 2 CPUs.
A2A_HINT_QUEUE = envbool("A2A_HINT_QUEUE", True)
A2A_HINT_THREADS = envint("A2A_HINT_THREADS", 8, positive=True)
A2A_SWEEP_INTERVAL = envfloat("A2A_SWEEP_INTERVAL", 1.0, positive=True)
# Seconds the sweep leaves a new task to the hint that starts it (its safety net after).
A2A_HINT_GRACE = envfloat("A2A_HINT_GRACE", 5.0, minimum=0)
# Longest single stream or blocking send to an agent that cannot be polled (then the
# stream is picked up again, up to the task's deadline).
A2A_LONG_CALL_MAX = envfloat("A2A_LONG_CALL_MAX", 240.0, positive=True)
# A long call's claim on its task: renewed every third of it while the call runs
# (a2a.lease_keeper), so a worker killed during the call lets the task go within it.
A2A_LONG_CALL_LEASE = envfloat("A2A_LONG_CALL_LEASE", 30.0, positive=True)
# Long calls (streams followed to their end, blocking sends, held sends) run on threads of
# their own where tasks are started (a2a.long_calls): at most this many per process, and
# per agent, so an agent that hangs holds that many threads, not those starting tasks.
# Each holds a database connection while it runs: 32 is four times the threads that
# started tasks (and ran long calls) before, well within PostgreSQL's 100 connections.
A2A_LONG_CALLS = envint("A2A_LONG_CALLS", 32, positive=True)
A2A_LONG_CALLS_PER_AGENT = envint("A2A_LONG_CALLS_PER_AGENT", 8, positive=True)
# How long a stopping process (a worker's SIGTERM, make run's Ctrl-C) waits for its running
# long calls (a2a.long_calls.stop): below the worker unit's TimeoutStopSec (160 s).
A2A_STOP_WAIT = envfloat("A2A_STOP_WAIT", 120.0, minimum=0)
# A stream's events that only add artifacts are applied at most this often (0: each one).
A2A_STREAM_APPLY_INTERVAL = envfloat("A2A_STREAM_APPLY_INTERVAL", 0.5, minimum=0)
# Queue a Celery message (with a countdown) for polls due before the next sweeps; off:
# every poll waits for the sweep, which claims and polls due tasks in batches.
A2A_POLL_MESSAGES = envbool("A2A_POLL_MESSAGES", False)
# Threads serving token calls to /api/tasks (each keeps its database connection); 0 runs
# them on the one shared sync thread. One in the embedded mode (SQLite and the in-process
# worker share one interpreter: more threads only contend), four on PostgreSQL.
TASKS_API_THREADS = envint("TASKS_API_THREADS", 1 if EMBEDDED else 4, minimum=0)
# Task creation caches skills and their candidate agents per process this long (a change
# made in this process clears them at once; one made elsewhere shows within this); 0: off.
A2A_REGISTRY_CACHE_SECONDS = envfloat("A2A_REGISTRY_CACHE_SECONDS", 2.0, minimum=0)
# Candidates' task counts are cached this long.
A2A_LOAD_CACHE_SECONDS = envfloat("A2A_LOAD_CACHE_SECONDS", 1.0, minimum=0)
# Most tasks one POST /api/tasks:batch may create.
TASKS_BATCH_MAX = envint("TASKS_BATCH_MAX", 100, positive=True)
# Agents whose card offers push notifications are asked to push each update of a task to
# a per-task webhook (PUBLIC_URL must reach the platform from the agent); polling stays as
# the safety net, from AGENT_PUSH_POLL_INTERVAL seconds on.
AGENT_PUSH_ENABLED = envbool("AGENT_PUSH_ENABLED", True)
# Other A2A 1.0 agents' polled tasks are followed by listing: one ListTasks per agent every
# A2A_LIST_INTERVAL seconds (0: off, every task polled on its own), each task's own polls
# from A2A_LIST_POLL_INTERVAL seconds on as the safety net (a2a.agent_listing).
A2A_LIST_INTERVAL = envfloat("A2A_LIST_INTERVAL", 1.0, minimum=0)
A2A_LIST_POLL_INTERVAL = envfloat("A2A_LIST_POLL_INTERVAL", 60.0, minimum=0)
AGENT_PUSH_POLL_INTERVAL = envfloat("AGENT_PUSH_POLL_INTERVAL", 60.0, minimum=0)
# Those safety-net polls back off (A2A_POLL_BACKOFF) while they find nothing new, up to
# this: the longest a lost push, or a change a listing missed, goes unnoticed (plus the
# jitter below).
A2A_SAFETY_POLL_INTERVAL_MAX = envfloat("A2A_SAFETY_POLL_INTERVAL_MAX", 600.0, minimum=0)
# Each safety-net poll comes up to this fraction of its interval later, at random: tasks
# sent together are not all polled in the same second, nor at the moment tasks of that
# length end and push (a poll racing the push is a request for nothing).
A2A_SAFETY_POLL_JITTER = max(0.0, envfloat("A2A_SAFETY_POLL_JITTER", 0.25))
AGENT_PUSH_MAX_BYTES = envint("AGENT_PUSH_MAX_BYTES", 1_000_000, positive=True)  # one pushed body
# Database threads applying pushes (each keeps its connection); 0: the shared sync thread.
AGENT_PUSH_THREADS = envint("AGENT_PUSH_THREADS", 2, minimum=0)

# --- A2A server face ------------------------------------------------------------------
A2A_DEFAULT_SKILL = envstr("A2A_DEFAULT_SKILL")
A2A_ALLOW_ANONYMOUS = envbool("A2A_ALLOW_ANONYMOUS", False)
A2A_EXTENDED_CARD_BEARER_TOKEN = envstr("A2A_EXTENDED_CARD_BEARER_TOKEN")
A2A_BLOCKING_TIMEOUT = envfloat("A2A_BLOCKING_TIMEOUT", 60.0, minimum=0)
A2A_MAX_PUSH_CONFIGS_PER_TASK = envint("A2A_MAX_PUSH_CONFIGS_PER_TASK", 10, positive=True)
A2A_PUSH_TIMEOUT = envfloat("A2A_PUSH_TIMEOUT", 10.0, positive=True)  # seconds per webhook POST
# POSTs per event and webhook.
A2A_PUSH_MAX_ATTEMPTS = envint("A2A_PUSH_MAX_ATTEMPTS", 5, positive=True)
# Seconds before a webhook retry, doubled per failed attempt.
A2A_PUSH_BACKOFF = envfloat("A2A_PUSH_BACKOFF", 1.0, minimum=0)
# Consecutive failed POSTs before a webhook is disabled.
A2A_PUSH_DISABLE_AFTER = envint("A2A_PUSH_DISABLE_AFTER", 10, positive=True)
A2A_PUSH_SWEEP_INTERVAL = envfloat("A2A_PUSH_SWEEP_INTERVAL", 30.0, positive=True)
# Webhook POSTs run on threads of their own (a2a.face.push_pool), never on the workers'
# that poll agents: at most this many at once per process, and per webhook host.
A2A_PUSH_THREADS = envint("A2A_PUSH_THREADS", 8, positive=True)
A2A_PUSH_PER_HOST = envint("A2A_PUSH_PER_HOST", 2, positive=True)
# A quiet stream re-reads its task this often.
A2A_STREAM_RECHECK = envfloat("A2A_STREAM_RECHECK", 5.0, positive=True)
# Task streams (message:stream, subscribe) one caller may hold open in one server process;
# one more is refused (429 TOO_MANY_STREAMS) before anything is sent (a2a/face/stream_slots.py).
A2A_MAX_STREAMS_PER_CALLER = envint("A2A_MAX_STREAMS_PER_CALLER", 1000, positive=True)
# Cache-Control max-age of agent cards.
A2A_CARD_MAX_AGE = envint("A2A_CARD_MAX_AGE", 300, minimum=0)
# Threads (each with its own database connection) serving the face's ORM calls; 0 runs
# them in Django's single sync thread instead.
A2A_FACE_DB_THREADS = envint("A2A_FACE_DB_THREADS", 4, minimum=0)
# How long a process reuses a successful token lookup (a revoked token keeps working that
# long at most); 0 looks every request up.
A2A_FACE_AUTH_CACHE_SECONDS = envfloat("A2A_FACE_AUTH_CACHE_SECONDS", 5.0, minimum=0)
PLATFORM_NAME = envstr("PLATFORM_NAME", "A2A Agent Platform")

# --- Gateway --------------------------------------------------------------------------
GATEWAY_AUTH_TIMEOUT = envfloat("GATEWAY_AUTH_TIMEOUT", 10.0, positive=True)
# Database threads of the gateway's sockets (each keeps its connection); 0: the shared sync
# thread.
GATEWAY_DB_THREADS = envint("GATEWAY_DB_THREADS", 4, minimum=0)
GATEWAY_HEARTBEAT_TIMEOUT = envfloat("GATEWAY_HEARTBEAT_TIMEOUT", 90.0, positive=True)
OFFLINE_TASK_TTL = envfloat("OFFLINE_TASK_TTL", 24 * 3600.0, positive=True)
GATEWAY_MAX_FRAME_BYTES = envint("GATEWAY_MAX_FRAME_BYTES", 256_000, positive=True)
# More than LIMIT bad frames within WINDOW seconds closes the connection (4429).
GATEWAY_BAD_FRAME_LIMIT = envint("GATEWAY_BAD_FRAME_LIMIT", 20, positive=True)
GATEWAY_BAD_FRAME_WINDOW = envfloat("GATEWAY_BAD_FRAME_WINDOW", 10.0, positive=True)
# Frames of any kind one connection may send: RATE a second on average, BURST at once;
# past them it is closed (4429): a flood of valid frames outran the server's reading.
GATEWAY_FRAME_RATE = envfloat("GATEWAY_FRAME_RATE", 200.0, positive=True)
GATEWAY_FRAME_BURST = envfloat("GATEWAY_FRAME_BURST", 1000.0, positive=True)
# Connections one agent may hold to one server process; past it a new one is refused
# (4429): each connection is sent all the agent's owed deliveries when it starts.
GATEWAY_MAX_CONNECTIONS_PER_AGENT = envint("GATEWAY_MAX_CONNECTIONS_PER_AGENT", 16, positive=True)
# Beat: expire offline tasks past OFFLINE_TASK_TTL and drop stale presence rows.
GATEWAY_SWEEP_INTERVAL = envfloat("GATEWAY_SWEEP_INTERVAL", 30.0, positive=True)

# --- Celery and Channels --------------------------------------------------------------
if DISTRIBUTED:
    CELERY_BROKER_URL = REDIS_URL
    # A stalled Redis (a frozen host, a partition: connections open, no answer) held a
    # publish for as long as it lasted (kombu reads without a timeout by default), and so
    # every request that creates a task, which publishes its hint after the commit. Now a
    # publish gives up in seconds ("the sweep will": the row is the truth). Longer than
    # the consumer's 1 s BRPOP.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}
    # One retry (a connection Redis dropped, then a new one), not kombu's three: each
    # waits out the socket timeout when Redis stalls.
    CELERY_TASK_PUBLISH_RETRY_POLICY = {
        "max_retries": 1,
        "interval_start": 0,
        "interval_step": 0.2,
        "interval_max": 0.2,
    }
    CHANNEL_LAYERS = {
        "default": {
            # channels_redis's, forgetting closed channels (platform_site/redis_layer.py).
            "BACKEND": "platform_site.redis_layer.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 reads with a 5 s socket timeout by default, which races
                # channels_redis's 5 s BZPOPMIN (an idle consumer would crash with 1011),
                # and caps a pool at 100 connections (thousands of sockets joining their
                # groups at once would fail with "Too many connections").
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": 30,
                        "max_connections": envint(
                            "CHANNELS_REDIS_MAX_CONNECTIONS", 1000, positive=True
                        ),
                    }
                ],
                "prefix": envstr("CHANNELS_PREFIX", "asgi"),
                # All process-specific channels of one daphne share one Redis queue: the
                # default capacity (100) would drop pushes beyond 100 in flight per process.
                "capacity": envint("CHANNELS_CAPACITY", 10_000, positive=True),
                # Gateway sockets live for days; consumers re-join hourly (gateway.connections).
                "group_expiry": envint("CHANNELS_GROUP_EXPIRY", 7 * 24 * 3600, positive=True),
            },
        }
    }
else:
    # With a host name: kombu warns "No hostname was supplied" for a bare memory://.
    CELERY_BROKER_URL = "memory://localhost/"
    # kombu's virtual transports poll their queues, by default once a second: that second
    # would be added to every task's latency. Polling memory is cheap.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"polling_interval": 0.02}
    # Channels' in-memory layer, its expiry sweep once a second instead of at every message
    # (it visits every channel and group: thousands with thousands of agent sockets).
    CHANNEL_LAYERS = {
        "default": {"BACKEND": "platform_site.memory_layer.ThrottledInMemoryChannelLayer"}
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = envint("CELERY_TASK_SOFT_TIME_LIMIT", 120, positive=True)
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", 150, positive=True)
CELERY_TASK_DEFAULT_QUEUE = envstr("CELERY_QUEUE", "platform")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Keep retrying the broker forever after a loss (Celery's default gives up after 100
# attempts, then the worker exits): an outage only delays work.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A task running when the broker drops finishes (its agent call is not cut half-way); its
# ack is lost, the message comes back after the visibility timeout and finds the task's
# row already done (tasks re-read rows and are safe to run twice). Explicit: Celery 6 will
# flip the default. The worker itself survives thanks to platform_site/kombu_fix.py.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# Periodic sweeps: the database is the source of truth, so these find whatever a lost
# message or a killed worker left behind.
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {}
CELERY_BEAT_SCHEDULE["a2a-face-sweep-push"] = {
    "task": "a2a.face.sweep_push",
    "schedule": A2A_PUSH_SWEEP_INTERVAL,
}
CELERY_BEAT_SCHEDULE["gateway-sweep"] = {
    "task": "gateway.tasks.sweep",
    "schedule": GATEWAY_SWEEP_INTERVAL,
}
# Dispatch: fail overdue tasks, claim due sends/polls/cancels, process them concurrently.
CELERY_BEAT_SCHEDULE["a2a-sweep"] = {
    "task": "a2a.sweep",
    "schedule": A2A_SWEEP_INTERVAL,
    "options": {"expires": max(A2A_SWEEP_INTERVAL * 5, 5.0)},
}
# Retention: delete tasks ended more than TASK_RETENTION_DAYS ago (nothing when 0).
CELERY_BEAT_SCHEDULE["a2a-prune"] = {
    "task": "a2a.prune",
    "schedule": 3600.0,
    "options": {"expires": 600.0},
}

# Registry: agents' health checks and due card re-reads (agent_profiles.tasks).
if AGENT_HEALTH_INTERVAL > 0 or AGENT_CARD_REFRESH_INTERVAL > 0:
    CELERY_BEAT_SCHEDULE["agent-profiles-check"] = {
        "task": "agent_profiles.check_agents",
        "schedule": AGENT_HEALTH_INTERVAL if AGENT_HEALTH_INTERVAL > 0 else 300.0,
        "options": {"expires": 60.0},
    }

# --- Operations -----------------------------------------------------------------------
# /metrics is open to loopback callers; others present this token (empty: refused).
METRICS_TOKEN = envstr("METRICS_TOKEN")
# prometheus-client's multi-process mode: one empty directory shared by every process of a
# host (read by prometheus-client itself; here for the docs).
PROMETHEUS_MULTIPROC_DIR = envstr("PROMETHEUS_MULTIPROC_DIR")
# Allocations between two collections of the youngest generation once a server process is
# ready (Python's default 700; 0 leaves it): see platform_site/gc_tuning.py.
GC_THRESHOLD = envint("GC_THRESHOLD", 7000, minimum=0)

LOG_FORMAT = envchoice("LOG_FORMAT", "text", {"text", "json"})
# Read here: logging.config's own refusal of an unknown level was a traceback that did not
# name the variable. Case-insensitive: `info` reads as `INFO`.
LOG_LEVEL = envchoice(
    "LOG_LEVEL", "INFO", {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}, upper=True
)
# Traces (platform_site/tracing.py reads it at each process start). Checked here: an
# exporter it does not know was a traceback from every process, not one line naming it.
OTEL_TRACES_EXPORTER = envchoice(
    "OTEL_TRACES_EXPORTER", "NONE", {"NONE", "OTLP", "CONSOLE"}, upper=True
).lower()
# dictConfig, then what it cannot say: warnings and uncaught exceptions go through the
# same handler (with LOG_FORMAT=json, one JSON object per line): platform_site/logs.py.
LOGGING_CONFIG = "platform_site.logs.configure"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "platform_site.logs.PlainFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        },
        "json": {"()": "platform_site.logs.JSONFormatter"},
    },
    "filters": {
        "bound_ids": {"()": "platform_site.logs.BoundIds"},
        "no_favicon": {"()": "platform_site.logs.SkipFavicon"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_FORMAT == "json" else "plain",
            "filters": ["bound_ids"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "httpx": {"level": "WARNING"},
        # At DEBUG it quotes every header of every answer: a webhook or token endpoint
        # that echoes the credential it was sent would put it in the log.
        "httpcore": {"level": "WARNING"},
        "django.channels.server": {"level": "WARNING"},
        "axes.apps": {"level": "WARNING"},  # a version banner at every start
        # one INFO line per admin login and logout; failures and lockouts are WARNING
        "axes.handlers.database": {"level": "WARNING"},
        "django.request": {"filters": ["no_favicon"]},
        # a2a-sdk's card rendering warns at every fetch of a card with no skill yet (a
        # fresh install's own card): nothing for an operator to act on.
        "a2a.utils.proto_utils": {"level": "ERROR"},
    },
}
if EMBEDDED:
    # `make run` shares one terminal with a newcomer: the sweeps run every second, and
    # Celery's per-message lines (received, succeeded) would bury everything else.
    # Failures still show (WARNING and above).
    LOGGING["loggers"].update(  # type: ignore[attr-defined]
        {
            "celery.worker.strategy": {"level": "WARNING"},
            "celery.app.trace": {"level": "WARNING"},
        }
    )
    LOGGING["filters"]["no_periodic_sends"] = {"()": "platform_site.logs.SkipPeriodicSends"}  # type: ignore[index]
    LOGGING["loggers"]["celery.beat"] = {"filters": ["no_periodic_sends"]}  # type: ignore[index]
