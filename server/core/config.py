"""Configuration: defaults, then a TOML file named by HPCGRADE_CONFIG, then HPCGRADE_* variables.

Every setting is a field of Settings, with its type, default, parser and description (the source
of docs/configuration.md); it is parsed and validated here, once: a wrong name or value stops
start-up with a message naming it. In the TOML file a `[slurm]` table stands for the SLURM_*
settings (`[slurm] gpus = 1` is SLURM_GPUS); in the environment a list is a JSON array.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from server.core.setting_values import (
    ConfigError,
    Parser,
    choice,
    choices,
    flag,
    ldap_address,
    mail_address,
    memory_mb,
    minutes,
    networks,
    optional,
    rate_limits,
    sandbox_layers,
    sbatch_options,
    seconds,
    strings,
    table,
    text,
    time_zone,
    web_address,
    whole,
    word,
)
from worker.harness.jobs import REQUIRED_LAYERS

if TYPE_CHECKING:
    from flask import Flask

ROOT = Path(__file__).resolve().parents[2]
EXECUTOR_NAMES = ("local", "slurm")


# --- what one Slurm job asks for ----------------------------------------------------------------


def slurm_option(default: Any, parse: Parser, about: str, sbatch: str | None) -> Any:
    """A field of Resources, the one place a Slurm option is declared: its default, its parser,
    one line saying what it does (the SLURM_<KEY> setting's), and how sbatch is asked for it
    (`{}` is the value; None: the value is a list of sbatch options). A value of None, 0 or ()
    asks sbatch nothing."""
    return dataclasses.field(
        default=default, metadata={"parse": parse, "about": about, "sbatch": sbatch}
    )


@dataclass(frozen=True)
class Resources:
    """A job's shape: the service's SLURM_<KEY> settings (Settings.slurm_<key>), overridden by a
    course's Slurm table, then per exercise by `[slurm]`; each field is one option, read by the
    settings, the course tables and the job script (worker/grading/slurm_text.py).

    Runs with equal shapes can share a job; a shape with `gpus = 0` never holds a GPU."""

    partition: str | None = slurm_option(
        None,
        optional(word),
        "The partition (Slurm's default if unset); a course's Slurm settings, then an "
        "exercise's `[slurm]` table, override this and the other SLURM_ settings of a job's "
        "shape, down to SLURM_EXTRA.",
        "--partition={}",
    )
    account: str | None = slurm_option(
        None, optional(word), "The account jobs are charged to.", "--account={}"
    )
    qos: str | None = slurm_option(None, optional(word), "The QOS.", "--qos={}")
    reservation: str | None = slurm_option(
        None,
        optional(word),
        "The reservation jobs run in (`scontrol create reservation`), e.g. a lab session's nodes.",
        "--reservation={}",
    )
    gpus: int = slurm_option(
        1, whole(0), "GPUs per job; 0: CPU only, holds no GPU.", "--gres=gpu:{}"
    )
    cpus: int = slurm_option(2, whole(1), "CPUs per job.", "--cpus-per-task={}")
    memory: int = slurm_option(
        4096, memory_mb, "Memory per job, in MB or Slurm's notation (`4G`, `4096M`).", "--mem={}M"
    )
    time: int = slurm_option(
        30,
        minutes,
        "Time limit per job, in minutes or Slurm's notation (`1:30:00`, `1-00:00:00`); a batch "
        "of runs shares it.",
        "--time={}",
    )
    extra: tuple[str, ...] = slurm_option(
        (), sbatch_options, 'More sbatch options, e.g. `["--constraint=a100"]`.', None
    )

    def override(self, overrides: dict, where: str) -> "Resources":
        return dataclasses.replace(self, **self.parse_overrides(overrides, where))

    @staticmethod
    def parse_overrides(overrides: dict, where: str) -> dict[str, Any]:
        """The values of a `[slurm]`-like table, parsed: what `dataclasses.replace` takes."""
        unknown = set(overrides) - set(SLURM_KEYS)
        if unknown:
            raise ConfigError(
                f"{where}: unknown keys {', '.join(sorted(unknown))}; valid keys are "
                f"{', '.join(SLURM_KEYS)}"
            )
        return {
            key: _option(key).metadata["parse"](f"{where} {key}", value)
            for key, value in overrides.items()
        }

    def sbatch(self) -> list[str]:
        """What sbatch is asked for this shape, option by option."""
        asked = []
        for option in dataclasses.fields(Resources):
            value, form = getattr(self, option.name), option.metadata["sbatch"]
            if value:
                asked += list(value) if form is None else [form.format(value)]
        return asked


SLURM_KEYS = tuple(option.name for option in dataclasses.fields(Resources))


def _option(key: str) -> dataclasses.Field:
    return next(option for option in dataclasses.fields(Resources) if option.name == key)


def slurm_setting(key: str) -> Any:
    """The SLURM_<KEY> setting: the Slurm option `key` of Resources, as a field of Settings."""
    option = _option(key)
    return setting(option.default, option.metadata["parse"], option.metadata["about"], SLURM)


# --- the settings -------------------------------------------------------------------------------


def setting(default: Any, parse: Parser, about: str, group: str) -> Any:
    """A field of Settings: its default, the parser its raw value goes through, one line saying
    what it does, and the group it is listed in (docs/configuration.md is made of these)."""
    held = (
        {"default_factory": lambda: dict(default)}
        if isinstance(default, dict)
        else {"default": default}
    )
    return dataclasses.field(**held, metadata={"parse": parse, "about": about, "group": group})


SERVICE, SUBMITTING, LOG_IN, MAIL = "The service", "Submitting", "Log-in and sessions", "Mail"
GRADING, SPOOL, SLURM = "Grading", "The spool", "Slurm"
MUNGE = "Submitting from the cluster (MUNGE)"
AUTH_SOURCES = ("local", "ldap", "oidc")  # models.AuthSource
DIRECTORY = "Directory (LDAP)"
SINGLE_SIGN_ON = "Single sign-on (OpenID Connect)"
OPERATIONS = "Operations"


@dataclass(frozen=True)
class Settings:
    """Every setting of the service, parsed and validated once (load_settings); a field's name in
    upper case is its setting's name (HPCGRADE_<NAME> in the environment)."""

    database_url: str = setting(
        f"sqlite:///{ROOT / 'instance' / 'hpcgrade.sqlite'}",
        text,
        "The database, as an SQLAlchemy URL (postgresql+psycopg://... on a cluster).",
        SERVICE,
    )
    broker_url: str = setting(
        "redis://127.0.0.1:6379/0", text, "Celery's broker, a Redis URL.", SERVICE
    )
    secret_key: str | None = setting(
        None,
        optional(text),
        "Signs sessions and set-password links; the portal needs it (`openssl rand -hex 32`).",
        SERVICE,
    )
    # by default sending a task fails at once while the broker is away: the submission is
    # already committed and the reconcile task sends it later, so a request never hangs on Redis
    broker_transport_options: dict = setting(
        {"max_retries": 0},
        table,
        "kombu's transport options (a TOML table). With Redis, `visibility_timeout` defaults "
        "to 10 minutes more than the longest task's time limit (a regrade's preview, 6 h): "
        "Redis hands a task that has not finished within it to another worker.",
        SERVICE,
    )
    timezone: str = setting(
        "UTC",
        time_zone,
        "The time zone (e.g. `Europe/Madrid`) of the courses that name none (a course names its "
        "own with `hpcgrade courses edit COURSE --timezone`, or on the admin's course page: "
        "courses.md): a course's deadlines and times are shown in its zone with the zone's name "
        '("18:00 CET") and taken in it by the exception forms, stored in UTC. The demo\'s '
        "courses take `Europe/Madrid`.",
        SERVICE,
    )
    public_url: str | None = setting(
        None,
        optional(web_address),
        "The portal's address as people reach it (e.g. "
        "`https://grader.uni.es`), for set-password links and the links in notices; unset, a page "
        "builds them from the address its request came to, and `hpcgrade users import` and "
        "notices give paths.",
        SERVICE,
    )
    trusted_proxies: int = setting(
        0, whole(0), "Proxies in front that set X-Forwarded-For (1 behind nginx).", SERVICE
    )

    max_upload_kb: int = setting(
        1024, whole(1), "The largest file a student may submit, in kB.", SUBMITTING
    )
    submissions_per_window: int = setting(
        20, whole(1), "Submissions a student may make per SUBMISSION_WINDOW_MINUTES.", SUBMITTING
    )
    submission_window_minutes: int = setting(
        60, whole(1), "The window SUBMISSIONS_PER_WINDOW counts in.", SUBMITTING
    )
    checks_per_window: int = setting(
        30,
        whole(0),
        "Runs of an exercise's visible checks from the portal (Check, which uses no attempt) a "
        "student may ask per SUBMISSION_WINDOW_MINUTES; 0 takes the button away.",
        SUBMITTING,
    )

    session_lifetime_hours: int = setting(
        12,
        whole(1),
        "A session ends this long after its last request (or at log-out, everywhere).",
        LOG_IN,
    )
    session_cookie_secure: bool = setting(
        True,
        flag,
        "Session cookies over https only; false only where the portal is reached over http.",
        LOG_IN,
    )
    session_cookie_samesite: str = setting(
        "Lax",
        choice(("Lax", "Strict")),
        "The session cookie's SameSite: `Lax` or `Strict`.",
        LOG_IN,
    )
    # the longer windows make the back-off
    login_limits_per_account: str = setting(
        "5 per minute; 20 per hour",
        rate_limits,
        "Failed log-ins allowed per account; over a "
        "limit, the next attempt is refused until the window frees up.",
        LOG_IN,
    )
    login_limits_per_address: str = setting(
        "30 per minute; 300 per hour",
        rate_limits,
        "Failed log-ins allowed per client address.",
        LOG_IN,
    )
    login_limits_storage: str | None = setting(
        None,
        optional(text),
        "Where failed log-ins are counted: a `redis://` URL (default: the "
        "broker's), or `memory://` for one process.",
        LOG_IN,
    )
    password_checks_per_process: int = setting(
        2,
        whole(1),
        "Password checks one process runs at once; more are refused with a 429.",
        LOG_IN,
    )
    token_lifetime_days: int = setting(
        120, whole(1), "How long an API token (the terminal client's) is valid.", LOG_IN
    )
    set_password_link_days: int = setting(
        14,
        whole(1),
        "A new account's link to set its password (also one a staff reset gives) "
        "works once, and for this long.",
        LOG_IN,
    )

    mail_server: str | None = setting(
        None,
        optional(text),
        "The SMTP host that mails set-password links and notices (a "
        "worker consuming the `mail` queue sends them); unset, nothing is mailed.",
        MAIL,
    )
    mail_port: int = setting(25, whole(1), "The SMTP port.", MAIL)
    mail_from: str | None = setting(
        None,
        optional(mail_address),
        "The address mail comes from, e.g. "
        '`"hpcgrade <noreply@uni.es>"`; required with MAIL_SERVER.',
        MAIL,
    )
    mail_username: str | None = setting(None, optional(text), "The SMTP log-in, if any.", MAIL)
    mail_password: str | None = setting(None, optional(text), "Its password.", MAIL)
    mail_starttls: bool = setting(False, flag, "STARTTLS before logging in.", MAIL)

    ldap_url: str | None = setting(
        None,
        optional(ldap_address),
        "The centre's directory, `ldaps://ldap.uni.es` or "
        "`ldap://ldap.uni.es` with LDAP_START_TLS; unset, only local accounts log in. A username "
        "of a local account always logs in with its local password.",
        DIRECTORY,
    )
    ldap_start_tls: bool = setting(False, flag, "StartTLS on an `ldap://` LDAP_URL.", DIRECTORY)
    # passwords in the clear: only for a directory on the same host
    ldap_allow_plain: bool = setting(
        False,
        flag,
        "Allow an `ldap://` LDAP_URL without StartTLS (passwords cross the network in the clear).",
        DIRECTORY,
    )
    ldap_ca_file: str | None = setting(
        None,
        optional(text),
        "The CA certificates (PEM) the directory's certificate is checked "
        "against; unset, the system's.",
        DIRECTORY,
    )
    ldap_bind_dn: str | None = setting(
        None,
        optional(text),
        "The service account that searches for a user's entry, e.g. "
        "`cn=hpcgrade,ou=services,dc=uni,dc=es`; unset, an anonymous search.",
        DIRECTORY,
    )
    ldap_bind_password: str | None = setting(None, optional(text), "Its password.", DIRECTORY)
    ldap_user_base: str | None = setting(
        None,
        optional(text),
        "Where people are searched, e.g. `ou=people,dc=uni,dc=es`; required with LDAP_URL.",
        DIRECTORY,
    )
    ldap_user_filter: str = setting(
        "(&(objectClass=inetOrgPerson)(uid={username}))",
        text,
        "The filter that finds the entry of `{username}` (escaped), and of every person with `*`.",
        DIRECTORY,
    )
    ldap_username_attribute: str = setting("uid", word, "The attribute of the username.", DIRECTORY)
    ldap_name_attribute: str = setting("cn", word, "The attribute of the full name.", DIRECTORY)
    ldap_given_name_attribute: str = setting(
        "givenName", word, "The attribute of the given name.", DIRECTORY
    )
    ldap_family_name_attribute: str = setting(
        "sn", word, "The attribute of the family name, which lists of students sort by.", DIRECTORY
    )
    ldap_email_attribute: str = setting(
        "mail", word, "The attribute of the email address.", DIRECTORY
    )
    ldap_group_base: str | None = setting(
        None,
        optional(text),
        "Where groups are searched, e.g. `ou=groups,dc=uni,dc=es`; unset, "
        "no groups are read and no one is enrolled from them.",
        DIRECTORY,
    )
    ldap_group_filter: str = setting(
        "(|(member={dn})(uniqueMember={dn})(memberUid={username}))",
        text,
        "The filter that "
        "finds a person's groups, of their entry's `{dn}` or `{username}` (escaped).",
        DIRECTORY,
    )
    ldap_group_name_attribute: str = setting(
        "cn",
        word,
        "The attribute of a group's name, as courses' `directory_groups` name it.",
        DIRECTORY,
    )
    ldap_timeout_seconds: int = setting(
        5,
        whole(1),
        "How long the directory may take to answer; longer, a log-in says it "
        "cannot be reached (503).",
        DIRECTORY,
    )
    ldap_sync_minutes: int = setting(
        60,
        whole(1),
        "How often beat runs `hpcgrade users sync` (enrolments from groups), "
        "while LDAP_URL is set.",
        DIRECTORY,
    )

    oidc_issuer: str | None = setting(
        None,
        optional(web_address),
        "The centre's OpenID Connect provider (its issuer, e.g. "
        "`https://sso.uni.es/realms/uni`; http only on 127.0.0.1 or localhost); set, the log-in "
        "page offers it beside local accounts. The client's redirect URI to register there: "
        "the portal's address and `/login/oidc/callback`.",
        SINGLE_SIGN_ON,
    )
    oidc_client_id: str | None = setting(
        None,
        optional(text),
        "hpcgrade's client id at the provider; required with OIDC_ISSUER.",
        SINGLE_SIGN_ON,
    )
    oidc_client_secret: str | None = setting(
        None, optional(text), "Its client secret; required with OIDC_ISSUER.", SINGLE_SIGN_ON
    )
    oidc_username_claim: str = setting(
        "preferred_username",
        text,
        "The claim that is the username here (an account is made "
        "at the first log-in; a local account of that name is never taken over).",
        SINGLE_SIGN_ON,
    )
    oidc_groups_claim: str = setting(
        "groups",
        text,
        "The claim listing the person's groups, as courses' "
        "`directory_groups` name them (a role's groups enrol their members).",
        SINGLE_SIGN_ON,
    )
    oidc_scopes: tuple[str, ...] = setting(
        ("openid", "profile", "email"),
        strings,
        "The scopes asked for; `openid` among them, and "
        "the one that brings the groups claim where the provider needs one.",
        SINGLE_SIGN_ON,
    )
    oidc_label: str | None = setting(
        None,
        optional(text),
        "What the log-in button calls the provider's accounts, e.g. "
        '`"UCM account"` ("Log in with UCM account"); unset, "University account", '
        "translated.",
        SINGLE_SIGN_ON,
    )

    executor: str = setting(
        "local", choice(EXECUTOR_NAMES), "Where runs are graded: `local` or `slurm`.", GRADING
    )
    course_python: str | None = setting(
        None,
        optional(text),
        "The course venv's python as workers and compute nodes see it "
        "(torch and numpy), for the courses that name none of their own; "
        "the portal checks a submission's syntax with its own Python, so that should be the "
        "course's version or newer.",
        GRADING,
    )
    course: str = setting(
        "hpcgrade",
        word,
        "The slug of the course an installation of one course becomes at its "
        "upgrade to many (`hpcgrade db upgrade`, migration 0010), and the log-in counters' keys; "
        "each course has its own job names, `--wckey` and `--comment` (`hpcgrade courses …`).",
        GRADING,
    )
    grading_lease_seconds: int = setting(
        900,
        whole(1),
        "A run claimed this long ago and not ended goes back to the queue (its "
        "worker is taken for dead).",
        GRADING,
    )
    # a student flooding the queue (or looping until the time-out) holds one slot, never all
    max_running_per_student: int = setting(
        1, whole(1), "A student's files graded at once; the next waits its turn.", GRADING
    )
    requeue_after_seconds: int = setting(
        120,
        whole(1),
        "A queued submission sent this long ago (its message lost) or never is sent again.",
        GRADING,
    )
    collect_seconds: float = setting(
        1.0,
        seconds,
        "How often reports are read (one listing of the spool's done/ folder).",
        GRADING,
    )
    # a node without them answers a grader error, never a zero
    sandbox_required_layers: tuple[str, ...] = setting(
        REQUIRED_LAYERS,
        sandbox_layers,
        "Sandbox layers without which a node grades nothing; "
        "`filesystem` is either of mount-namespace and landlock.",
        GRADING,
    )

    spool_dir: str = setting(
        str(ROOT / "instance" / "spool"),
        text,
        "Where jobs and reports are written; for Slurm, "
        "on a filesystem the compute nodes share, at the same path (owner and group hpcgrade, "
        "mode 2770).",
        SPOOL,
    )
    # a job in a full spool cannot write its reports, and would use a try of each of its runs
    spool_min_free_mb: int = setting(
        512,
        whole(0),
        "Below this much free space in the spool, nothing is sent to be graded.",
        SPOOL,
    )
    spool_keep_days: int = setting(
        14,
        whole(1),
        "Job logs, dead pilots' folders and runs' folders left behind are removed "
        "this long after their last change (hourly, or `hpcgrade slurm prune`).",
        SPOOL,
    )

    slurm_partition: str | None = slurm_setting("partition")
    slurm_account: str | None = slurm_setting("account")
    slurm_qos: str | None = slurm_setting("qos")
    slurm_reservation: str | None = slurm_setting("reservation")
    slurm_gpus: int = slurm_setting("gpus")
    slurm_cpus: int = slurm_setting("cpus")
    slurm_memory: int = slurm_setting("memory")
    slurm_time: int = slurm_setting("time")
    slurm_extra: tuple[str, ...] = slurm_setting("extra")
    slurm_modules: tuple[str, ...] = setting(
        (), strings, 'Modules loaded before the harness starts, e.g. `["cuda/12.4"]`.', SLURM
    )
    slurm_batch_size: int = setting(
        20,
        whole(1),
        "Runs packed into one job; fewer when SLURM_TIME, less 2 minutes for the "
        "job's start, cannot hold them at their exercises' `budget_seconds` plus 45 s each: a "
        "job starts no run that could not end before its limit, and such runs go back to the "
        "queue without using an attempt.",
        SLURM,
    )
    slurm_batch_wait: float = setting(
        3.0,
        seconds,
        "Runs are sent at once while no job of ours waits to start, else once the "
        "oldest has waited this long for others to share its job.",
        SLURM,
    )
    slurm_poll_seconds: float = setting(
        5.0, seconds, "How often Slurm is asked about the jobs followed.", SLURM
    )
    # a node drained, a partition down: the runs end instead of waiting for ever
    slurm_pending_limit_seconds: int = setting(
        3600,
        whole(1),
        "A job the cluster has not started by then is cancelled, its runs a "
        'grader error, "cluster unavailable".',
        SLURM,
    )
    slurm_submit_host: str | None = setting(
        None,
        optional(text),
        "Run Slurm's commands there over ssh (e.g. "
        "`hpcgrade@login1`), where the service's machine has none.",
        SLURM,
    )
    slurm_ssh_options: tuple[str, ...] = setting(
        (),
        strings,
        'ssh\'s options, e.g. `["-i", "/etc/hpcgrade/id_ed25519"]`; every '
        "command shares one connection (`-o ControlMaster=auto -o "
        "ControlPath=SPOOL_DIR/ssh/%C -o ControlPersist=60` added after these, so an option "
        'given here wins: `["-o", "ControlMaster=no"]` turns it off, `["-o", '
        '"ControlPath=/run/hpcgrade/%C"]` moves the socket where SPOOL_DIR is too long for a '
        "socket's address, about 90 bytes with `%C`'s 40).",
        SLURM,
    )

    munge_login: bool = setting(
        False,
        flag,
        "Take a MUNGE credential of the cluster in place of a token: on a login or "
        "compute node, `hpcgrade submit`, `check` and `%hpcgrade` need no log-in (the client "
        "makes one credential per request, bound to it).",
        MUNGE,
    )
    munge_accounts: tuple[str, ...] = setting(
        ("ldap",),
        choices(AUTH_SOURCES),
        "The accounts a cluster user is, by the name the "
        "decoding host gives their uid and by how the account logs in: the directory's (`ldap`) "
        "are the cluster's; add `oidc` or `local` only where those usernames are the cluster's "
        "too.",
        MUNGE,
    )
    munge_min_uid: int = setting(
        1000, whole(0), "Credentials of lower uids (root, system accounts) are refused.", MUNGE
    )
    munge_max_age_seconds: int = setting(
        120,
        whole(1),
        "A credential made longer ago than this (or by a clock this far ahead) is "
        "refused, whatever TTL it was given.",
        MUNGE,
    )
    munge_socket: str | None = setting(
        None,
        optional(text),
        "The munged socket unmunge asks (`unmunge -S`); unset, munge's "
        "default. unmunge runs on SLURM_SUBMIT_HOST where that is set.",
        MUNGE,
    )

    worker_heartbeat_seconds: float = setting(
        10.0,
        seconds,
        "How often each worker sends itself a heartbeat through the broker and "
        "takes it back, as it takes tasks; three missed, the worker is gone or stuck (/healthz "
        "and /metrics say so, systemd's watchdog restarts it).",
        OPERATIONS,
    )
    metrics_allow: tuple[str, ...] = setting(
        ("127.0.0.1", "::1"),
        networks,
        "The addresses and networks (`10.1.0.0/16`) that may read "
        "/metrics without a token (the client's address behind TRUSTED_PROXIES).",
        OPERATIONS,
    )
    metrics_token: str | None = setting(
        None,
        optional(text),
        "A bearer token that reads /metrics from any address "
        "(`Authorization: Bearer …`, Prometheus's `authorization` of a scrape).",
        OPERATIONS,
    )

    def to_dict(self) -> dict:
        """Every setting by name, as load_settings takes them back (written to a TOML file for
        processes of their own)."""
        return {field.name.upper(): getattr(self, field.name) for field in dataclasses.fields(self)}

    @property
    def worker_heartbeat_stale_seconds(self) -> float:
        """A worker's heartbeat older than this: the worker is gone, or takes nothing."""
        return 3 * self.worker_heartbeat_seconds

    @property
    def slurm_resources(self) -> Resources:
        """The service's default job shape, from the SLURM_* settings."""
        return Resources(**{key: getattr(self, f"slurm_{key}") for key in SLURM_KEYS})


FIELDS = {field.name.upper(): field for field in dataclasses.fields(Settings)}
# Flask's own keys, taken beside the settings (tests give TESTING); the app factory reads them
FLASK_KEYS = frozenset({"TESTING"})


def load_settings(overrides: dict | None = None) -> Settings:
    """Defaults, then the TOML file HPCGRADE_CONFIG names, then HPCGRADE_* variables, then
    `overrides` (by setting name), each value parsed; a wrong name or value is a ConfigError."""
    raw = {}
    path = os.environ.get("HPCGRADE_CONFIG")
    if path:
        raw.update(_read_file(path))
    for name in FIELDS:
        if f"HPCGRADE_{name}" in os.environ:
            raw[name] = os.environ[f"HPCGRADE_{name}"]
    raw.update(overrides or {})
    unknown = set(raw) - set(FIELDS) - FLASK_KEYS
    if unknown:
        raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
    settings = Settings(
        **{
            field.name: field.metadata["parse"](name, raw[name])
            for name, field in FIELDS.items()
            if name in raw
        }
    )
    if settings.mail_server and not settings.mail_from:
        raise ConfigError("MAIL_SERVER is set: set MAIL_FROM too (the address mail comes from)")
    _check_directory(settings)
    _check_single_sign_on(settings)
    return settings


def _check_single_sign_on(settings: Settings) -> None:
    if not settings.oidc_issuer:
        if settings.oidc_client_id or settings.oidc_client_secret:
            raise ConfigError("OIDC_CLIENT_ID or OIDC_CLIENT_SECRET is set: set OIDC_ISSUER too")
        return
    if not (settings.oidc_client_id and settings.oidc_client_secret):
        raise ConfigError("OIDC_ISSUER is set: set OIDC_CLIENT_ID and OIDC_CLIENT_SECRET too")
    issuer = urlsplit(settings.oidc_issuer)
    # tokens and the client secret cross this connection: plain http only on this machine
    if issuer.scheme != "https" and issuer.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise ConfigError(f"OIDC_ISSUER must be an https address, not {settings.oidc_issuer!r}")
    if "openid" not in settings.oidc_scopes:
        raise ConfigError("OIDC_SCOPES must include openid")


def _check_directory(settings: Settings) -> None:
    if not settings.ldap_url:
        return
    if not settings.ldap_user_base:
        raise ConfigError("LDAP_URL is set: set LDAP_USER_BASE too (where people are searched)")
    if "{username}" not in settings.ldap_user_filter:
        raise ConfigError(
            "LDAP_USER_FILTER must hold {username}, e.g. "
            "(&(objectClass=inetOrgPerson)(uid={username}))"
        )
    if settings.ldap_url.startswith("ldap://") and not (
        settings.ldap_start_tls or settings.ldap_allow_plain
    ):
        raise ConfigError(
            "LDAP_URL is ldap:// without LDAP_START_TLS: passwords would cross "
            "the network in the clear; use ldaps://, set LDAP_START_TLS = true, or "
            "LDAP_ALLOW_PLAIN = true for a directory on this host"
        )
    if settings.ldap_url.startswith("ldaps://") and settings.ldap_start_tls:
        raise ConfigError("LDAP_START_TLS is for an ldap:// LDAP_URL; ldaps:// is TLS already")
    if bool(settings.ldap_bind_dn) != bool(settings.ldap_bind_password):
        raise ConfigError("LDAP_BIND_DN and LDAP_BIND_PASSWORD go together")


def _read_file(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"HPCGRADE_CONFIG={path}: {exc}") from None
    slurm = data.pop("slurm", {})
    if not isinstance(slurm, dict):
        raise ConfigError(f"HPCGRADE_CONFIG={path}: slurm must be a table")
    return {
        **{k.upper(): v for k, v in data.items()},
        **{f"SLURM_{k.upper()}": v for k, v in slurm.items()},
    }


SETTINGS_KEY = "hpcgrade.settings"


def app_settings(app: Flask | None = None) -> Settings:
    """The settings of `app`, else of the current Flask app (a request, a CLI command, a task)."""
    from flask import current_app  # not at import: the command line reads settings without Flask

    return (app if app is not None else current_app).extensions[SETTINGS_KEY]
