"""The table of secrets and look-alikes that ``--redact secrets``, ``jsonltape redact`` and the
commit guard are held to (tests/test_redaction_table.py runs it through each of them).

Every secret is built here at run time from a seeded generator in the alphabet and length of
its kind (real keys are random, so their entropy is that of random text), so this repository's
source holds no real-looking key. Each positive is ``(text, secret, kind)``: the text a session
holds, the part of it that must not survive, and the rule that names it. Each negative is text
that looks like a secret to a careless pattern and must come out exactly as it went in.
"""

from __future__ import annotations

import base64
import random
import string

__all__ = ["NEGATIVE", "POSITIVE", "fake"]

_rng = random.Random(20261206)
_ALNUM = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"
_UPPER32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def fake(n: int, alphabet: str = _ALNUM) -> str:
    """``n`` random characters of ``alphabet`` (seeded: the same on every run)."""
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


AWS_ID = "AKIA" + fake(16, _UPPER32)
GITHUB = "ghp_" + fake(36)
GITHUB_OAUTH = "gho_" + fake(36)
GITHUB_FINE = "github_pat_" + fake(82, _ALNUM + "_")
GITLAB = "glpat-" + fake(20)
STRIPE = "sk_live_" + fake(24)
STRIPE_RESTRICTED = "rk_test_" + fake(30)
HUGGING_FACE = "hf_" + fake(34, string.ascii_letters)
SLACK = f"xoxb-{fake(12, string.digits)}-{fake(12, string.digits)}-{fake(24)}"
SLACK_HOOK = (
    f"https://hooks.slack.com/services/T{fake(8, string.ascii_uppercase + string.digits)}"
    f"/B{fake(8, string.ascii_uppercase + string.digits)}/{fake(24)}"
)
ANTHROPIC = "sk-ant-api03-" + fake(93, _ALNUM + "_-") + "AA"
ANTHROPIC_SHORT = "sk-ant-" + fake(32)
OPENAI = "sk-proj-" + fake(74, _ALNUM + "_-") + "T3BlbkFJ" + fake(74, _ALNUM + "_-")
OPENAI_PLAIN = "sk-proj-" + fake(48)
GOOGLE = "AIza" + fake(35, _ALNUM + "_-")
JWT = ".".join(
    [
        _b64url(b'{"alg":"HS256","typ":"JWT"}'),
        _b64url(f'{{"sub":"{fake(12)}","iat":1516239022}}'.encode()),
        fake(43, _ALNUM + "_-"),
    ]
)
NPM = "npm_" + fake(36)
PYPI = "pypi-AgEIcHlwaS5vcmc" + fake(70, _ALNUM + "_-")
SENDGRID = f"SG.{fake(22, _ALNUM + '_-')}.{fake(43, _ALNUM + '_-')}"
TWILIO = "SK" + fake(32, _HEX)
DIGITALOCEAN = "dop_v1_" + fake(64, _HEX)
SHOPIFY = "shpat_" + fake(32, _HEX)
DOPPLER = "dp.pt." + fake(43)
DATABRICKS = "dapi" + fake(32, _HEX)
LINEAR = "lin_api_" + fake(40)
GRAFANA = f"glsa_{fake(32)}_{fake(8, _HEX)}"
AGE = "AGE-SECRET-KEY-1" + fake(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")
VAULT = "hvs." + fake(100, _ALNUM + "_-")
POSTMAN = f"PMAK-{fake(24, _HEX)}-{fake(34, _HEX)}"
AZURE_AD = fake(3) + "8Q~" + fake(34, _ALNUM + "_~.-")
PEM_LINES = [fake(64, _ALNUM + "+/") for _ in range(8)]
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(PEM_LINES) + "\n-----END RSA PRIVATE KEY-----"
PEM_CUT = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(PEM_LINES[:2])
HEX128 = fake(128, _HEX)
CLIENT_SECRET = fake(40)
BEARER = fake(40, _ALNUM + "._-")
BASIC = base64.b64encode(f"deploy:{fake(16)}".encode()).decode()
ACCOUNT_KEY = fake(86, _ALNUM + "+/") + "=="
SHARED_KEY = fake(43, _ALNUM + "+/") + "="
DJANGO = "django-insecure-" + fake(50, _ALNUM + "!@#%^&*(-_=+)")

#: (text, secret that must not survive, kind it is counted as)
POSITIVE: list[tuple[str, str, str]] = [
    # -- gitleaks' rules ----------------------------------------------------------------------
    (f"aws_access_key_id = {AWS_ID}", AWS_ID, "aws-access-token"),
    (f"export GH_TOKEN={GITHUB}", GITHUB, "github-pat"),
    (f"oauth: {GITHUB_OAUTH}", GITHUB_OAUTH, "github-oauth"),
    (f"token {GITHUB_FINE} works", GITHUB_FINE, "github-fine-grained-pat"),
    (f"git clone https://oauth2:{GITLAB}@gitlab.com/x/y.git", GITLAB, "gitlab-pat"),
    (f"stripe.api_key = '{STRIPE}'", STRIPE, "stripe-access-token"),
    (f"restricted key {STRIPE_RESTRICTED} for tests", STRIPE_RESTRICTED, "stripe-access-token"),
    (f"HF_TOKEN={HUGGING_FACE}", HUGGING_FACE, "huggingface-access-token"),
    (f"SLACK_BOT_TOKEN={SLACK}", SLACK, "slack-bot-token"),
    (f"curl -X POST {SLACK_HOOK}", SLACK_HOOK, "slack-webhook-url"),
    (f"ANTHROPIC_API_KEY={ANTHROPIC}", ANTHROPIC, "anthropic-api-key"),
    (f'client = OpenAI(api_key="{OPENAI}")', OPENAI, "openai-api-key"),
    (f"maps key {GOOGLE}", GOOGLE, "gcp-api-key"),
    (f"Cookie: session={JWT}", JWT, "jwt"),
    (f"//registry.npmjs.org/:_authToken={NPM}", NPM, "npm-access-token"),
    (f"password = {PYPI}", PYPI, "pypi-upload-token"),
    (f"SENDGRID_API_KEY={SENDGRID}", SENDGRID, "sendgrid-api-token"),
    (f"twilio {TWILIO}", TWILIO, "twilio-api-key"),
    (f"DIGITALOCEAN_TOKEN={DIGITALOCEAN}", DIGITALOCEAN, "digitalocean-pat"),
    (f"shopify token: {SHOPIFY}", SHOPIFY, "shopify-access-token"),
    (f"DOPPLER_TOKEN={DOPPLER}", DOPPLER, "doppler-api-token"),
    (f"databricks token {DATABRICKS}", DATABRICKS, "databricks-api-token"),
    (f"LINEAR_API_KEY={LINEAR}", LINEAR, "linear-api-key"),
    (f"grafana {GRAFANA}", GRAFANA, "grafana-service-account-token"),
    (f"# {AGE}", AGE, "age-secret-key"),
    (f"VAULT_TOKEN={VAULT}", VAULT, "vault-service-token"),
    (f"postman {POSTMAN}", POSTMAN, "postman-api-token"),
    (f'AZURE_CLIENT_SECRET="{AZURE_AD}"', AZURE_AD, "azure-ad-client-secret"),
    (f"cat id_rsa\n{PEM}\n", PEM_LINES[3], "private-key"),
    (f"secret_key_base: {HEX128}", HEX128, "generic-api-key"),
    (f'"client_secret": "{CLIENT_SECRET}",', CLIENT_SECRET, "generic-api-key"),
    (
        f'curl -H "Authorization: Bearer {BEARER}" https://api.example.com',
        BEARER,
        "curl-auth-header",
    ),
    (f"SECRET_KEY = '{DJANGO}'", DJANGO, "assignment"),
    # -- the supplement -----------------------------------------------------------------------
    (f"key {ANTHROPIC_SHORT}", ANTHROPIC_SHORT, "anthropic-key"),
    (f"OPENAI_KEY is {OPENAI_PLAIN} now", OPENAI_PLAIN, "openai-key"),
    (f"head -3 id_ed25519\n{PEM_CUT}", PEM_LINES[1], "private-key-block"),
    (
        "DefaultEndpointsProtocol=https;AccountName=logs;"
        f"AccountKey={ACCOUNT_KEY};EndpointSuffix=core.windows.net",
        ACCOUNT_KEY,
        "azure-storage-key",
    ),
    (
        "Endpoint=sb://bus.servicebus.windows.net/;SharedAccessKeyName=root;"
        f"SharedAccessKey={SHARED_KEY}",
        SHARED_KEY,
        "azure-storage-key",
    ),
    ("mysql -h db -u root -pS3cretPassw0rd shop", "S3cretPassw0rd", "mysql-password"),
    ("mysqldump -u admin -p'dump pass 42' shop > s.sql", "dump pass 42", "mysql-password"),
    ("docker login -u ci -p Dock3rHubPass registry.io", "Dock3rHubPass", "docker-login-password"),
    ("docker login --password=RegPassw0rd9 ghcr.io", "RegPassw0rd9", "docker-login-password"),
    (f"Authorization: Bearer {BEARER}", BEARER, "bearer"),
    (f"Authorization: Basic {BASIC}", BASIC, "bearer"),
    ("redis://:hunter2pass@cache:6379/0", "hunter2pass", "url-password"),
    ("postgres://app:pa/ss@w:rd@db.internal:5432/x", "pa/ss@w:rd", "url-password"),
    ("https://deploy:p@ssw0rd@example.com/repo.git", "p@ssw0rd", "url-password"),
    ("amqp://guest:s3cr/et@[::1]:5672", "s3cr/et", "url-password"),
    ("POSTGRES_PASSWORD: correcthorsebatterystaple", "correcthorsebatterystaple", "assignment"),
    ("  MYSQL_ROOT_PASSWORD: 'tr0ub4dor'", "tr0ub4dor", "assignment"),
    ("DB_PASSWORD=letmeinplease", "letmeinplease", "assignment"),
    ('DB_SECRET="two words"', "two words", "assignment"),
    ("export GITLAB_TOKEN=glpatXYZabcdef", "glpatXYZabcdef", "assignment"),
    ("export AWS_SECRET_ACCESS_KEY='wJalrXUtnFEMIbPxRfiCY'", "wJalrXUtnFEMIbPxRfiCY", "assignment"),
    ('{"DB_PASSWORD": "qu\\"oted<&>"}', 'qu\\"oted<&>', "assignment"),
    ('{\\"password\\": \\"hunter2hunter\\"}', "hunter2hunter", "assignment"),
    ("STRIPE_KEY=rk_live_abcdefgh", "rk_live_abcdefgh", "assignment"),
    ("SMTP_PASS: horsestaplebattery", "horsestaplebattery", "assignment"),
    ("ADMIN_PWD=Zebra", "Zebra", "assignment"),
    ("PGPASSWORD=pgsecretvalue psql -h db", "pgsecretvalue", "assignment"),
    ("password: correcthorsebattery", "correcthorsebattery", "assignment"),
    ("token: 8f14e45fceea167a", "8f14e45fceea167a", "assignment"),
    ("api_key = 'abc123def456'", "abc123def456", "generic-api-key"),
    ("client_secret: xyzzyplughfoo", "xyzzyplughfoo", "assignment"),
    ("connect --password=Hunter2Hunter", "Hunter2Hunter", "assignment"),
]

#: Text that must come out exactly as it went in.
NEGATIVE: list[str] = [
    "password: str",  # a type annotation
    "db_password: Optional[str] = None",
    "token: we need it before the deploy",  # prose
    "Token: Authentication happens first",
    "primary_key: id",
    "sort_key = created_at",
    "first_pass: done",
    "token_count: 5, max_tokens=100",
    "password = getpass()",
    "password: $DB_PASSWORD",
    "token: {{ vault_token }}",
    "http://localhost:8080/path?a=b",
    "mail me at ada@example.com, or https://example.com/@ada",
    "the monkey: a primate",
    "request 550e8400-e29b-41d4-a716-446655440000 failed",  # a UUID
    "commit 3f2a9c0d1e4b5a69788776655443322110ffeedd\nAuthor: Ada <ada@example.com>",  # git log
    "image sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "the sk- prefix marks an OpenAI key; sk-learn is a typo for scikit-learn",
    "AKIA is how AWS access key ids begin",
    "ghp_ tokens are GitHub's personal access tokens",
    "Bearer tokens go in the Authorization header",
    "docker login -u ci --password-stdin registry.io",
    "mysql -u root -p shop",  # -p alone: mysql asks for the password
    "git clone https://git@github.com/owner/repo.git",  # a user, no password
    "public_key = ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIexample",
    "api_version = 2024-06-01",
    "const accessor = obj.accessor;",
    "const apiKey = await getApiKey(provider);",  # code
    "export ANTHROPIC_API_KEY=sk-ant-...  # your key here",  # an elided placeholder
    "pwd = ~",
    "token = `${prefix}-${id}`",  # a template
]
