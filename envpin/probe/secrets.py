"""Credential detection: reports are shared between machines and people, so secrets never enter them.

Two tests, either one is enough to redact an environment variable:

* its NAME looks like a credential (``TOKEN``, ``KEY``, ``SECRET``, ``PASSWORD``, ``CREDENTIAL``, ``AUTH``...);
* its VALUE looks like one: a known token prefix (``ghp_``, ``AKIA``, ``hf_``, ``xoxb-``...), a JWT, a URL
  with ``user:password@``, a ``Bearer``/``Basic`` credential, a PEM private key, or a long high-entropy run
  of letters and digits.

Besides, every string of a finished report is scanned for the unmistakable value patterns (not the
entropy test, which would hit digests) and such substrings are replaced by ``<redacted>``; so are the
values of credential-named parameters inside any string (``?sig=...``, ``--some_token=...``,
``"password": "..."``), keeping the parameter's name so the rest of a flag list stays readable.

``anonymize`` replaces the host name, the user name and the home folder by fixed placeholders.
"""

import math
import re
from typing import Any, Dict, List, Optional, Tuple

REDACTED = "<redacted>"

_NAME = re.compile(
    r"TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|PWD$|CRED|AUTH|KEY|PRIVATE|COOKIE|SESSION|SIGNATURE|BEARER|LOGIN"
    r"|(^|_)SALT($|_)|(^|_)PASS($|_)|(^|_)PAT($|_)|(^|_)DSN($|_)|(^|_)PW($|_)|(^|_)SIG($|_)|(^|_)SAS($|_)"
    r"|WEBHOOK",
    re.IGNORECASE,
)

# Names that match the pattern above but are known not to hold credentials.
_NAME_ALLOW = frozenset(["PWD", "OLDPWD", "KEYBOARD", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS"])

_TOKEN_PATTERNS = [
    r"gh[pousr]_[A-Za-z0-9]{16,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{20,}",
    r"glpat-[A-Za-z0-9_\-]{16,}",  # GitLab
    r"(AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}",  # AWS access key ids
    r"AIza[0-9A-Za-z_\-]{30,}",  # Google API keys
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
    r"hf_[A-Za-z0-9]{20,}",  # Hugging Face
    r"sk-[A-Za-z0-9_\-]{20,}",  # OpenAI-style keys
    r"npm_[A-Za-z0-9]{20,}",
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",  # JWT
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    # URL with user:password@ (or :password@); the scheme starts a word, so a long run of letters is one try.
    # The password may hold a '/' (a raw one, not %2F, still reaches clients) and an '@' when another '@'
    # follows before the next '/' (clients split user info at its last '@'); a port followed by a path
    # (host:8080/a@b) is not a password.
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:(?![0-9]+(?:[/\s]|$))(?:[^\s@]|@(?=[^\s/@]*@))+@",
    # An Authorization header's credential: Bearer <token>; Basic <base64> (with a digit, '+', '/' or '=',
    # so "Basic training" is prose)
    r"\b[Bb]earer\s+[A-Za-z0-9._~+/=\-]{8,}",
    r"\b[Bb]asic\s+(?=[A-Za-z]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}",
]
_TOKEN = re.compile("|".join("(?:%s)" % p for p in _TOKEN_PATTERNS))
# A NAME=VALUE, NAME: VALUE or "NAME": "VALUE" pair inside a longer string (query strings, flag lists, JSON).
# The name starts a word (one try per word: no backtracking across long runs), ':' separates only when
# followed by a space or after a quote (so a path list such as /opt/tokenizers:/usr/lib is not a pair), and
# whether the name is a credential's is decided by its parts (_keyed_name), not by a substring.
_PAIR = re.compile(
    r"(?<![A-Za-z0-9_\-])([A-Za-z0-9_\-]{1,80})"
    r"((?:[\"']?\s*=\s*|[\"']?\s*:\s+|[\"']:\s*)[\"']?)"
    r"((?<=\")(?:[^\"\\\n]|\\.)+|(?<=')(?:[^'\\\n]|\\.)+|[^\s&;,\"'<>]+)"  # a quoted value whole (spaces, escapes)
)
# NAME:VALUE with nothing between (password:hunter2), judged in a pass of its own so that it never hides a
# NAME=VALUE pair after it (grpc://h:1?credential=...); a ':' before '/' or ':' is a path list or a URL.
_COLON_PAIR = re.compile(r"(?<![A-Za-z0-9_\-])([A-Za-z0-9_\-]{1,80})(:)(?=[^\s/\\:])([^\s&;,\"'<>:=?/]+)")
# A flag and its value as a separate word (--password VALUE, -token VALUE) inside a flag list; the flag starts
# a word, and the value is the next word unless it is itself a flag.
_FLAG = re.compile(
    r"(?<![^\s\"'])(--?[A-Za-z][A-Za-z0-9_\-]{0,79})([ \t]+)"
    r"(\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|[^\s\-\"'<>][^\s\"'<>]*)"
)
# An Authorization header's value, whatever its scheme (token X, Digest X; Bearer and Basic are patterns of
# their own): the scheme and the credential after it, the header's name kept.
_AUTH_HEADER = re.compile(
    r"(?<![A-Za-z0-9_\-])(authorization[\"']?\s*[:=]\s*[\"']?)"
    r"[A-Za-z][A-Za-z0-9_\-]*[ \t]+[^\s\"'<>,;]+",
    re.IGNORECASE,
)
# A name's parts: runs of '_' and '-' separate them, and so does a lower-to-upper case step (privateKey). The
# case step is an empty match, which re.split skips (with a FutureWarning) on Python 3.6 and splits at from
# 3.7 on: so the step is first made a '_' by a substitution that matches a character, and only the
# non-empty separator pattern is split at, which gives the same parts on every version.
_CASE_STEP = re.compile(r"([a-z])(?=[A-Z])")
_KEY_PARTS = re.compile(r"[_\-]+")


def key_parts(name: str) -> List[str]:
    """The lower-cased parts of a parameter NAME, split at '_' and '-' runs and at camelCase steps."""
    return [p.lower() for p in _KEY_PARTS.split(_CASE_STEP.sub(r"\1_", name)) if p]


_SECRET_PARTS = frozenset(
    [
        "token",
        "tokens",
        "secret",
        "secrets",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "pass",
        "pw",
        "cred",
        "creds",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "sig",
        "signature",
        "sas",
        "apikey",
    ]
)
_KEY_QUALIFIERS = frozenset(["api", "access", "private", "secret", "signing", "account"])
#: A part that ends in one of these is a credential's name too, run together with what it belongs to
#: (PGPASSWORD, accesstoken, clientsecret); a part that only starts with one (tokenizers) is not.
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "secret", "token")


def _keyed_name(name: str) -> bool:
    """Whether a parameter NAME holds a credential: one of its parts (split at '_', '-' and camelCase) is a
    credential word or ends in one, or it is a key qualified as one (api_key, access-key, privateKey)."""
    parts = set(key_parts(name))
    return (
        bool(parts & _SECRET_PARTS)
        or any(p.endswith(_SECRET_ENDINGS) for p in parts)
        or ("key" in parts and bool(parts & _KEY_QUALIFIERS))
    )


def _redact_flag(m: "re.Match[str]") -> str:
    if m.group(3) == REDACTED:
        return m.group(0)
    if not _keyed_name(m.group(1)):  # a quoted value is one match: what it quotes is judged on its own
        return (
            m.group(1) + m.group(2) + (_FLAG.sub(_redact_flag, m.group(3)) if m.group(3)[:1] in "\"'" else m.group(3))
        )
    return m.group(1) + m.group(2) + REDACTED


def _redact_pair(m: "re.Match[str]") -> str:
    if m.group(3) == REDACTED:
        return m.group(0)
    if not _keyed_name(m.group(1)):  # a quoted value is one match: what it quotes is judged on its own
        return (
            m.group(1) + m.group(2) + (_PAIR.sub(_redact_pair, m.group(3)) if m.group(2)[-1:] in "\"'" else m.group(3))
        )
    return m.group(1) + m.group(2) + REDACTED


_SEGMENTS = re.compile(r"[\s:/,;=@\"'()\[\]{}\-]+")


def secret_name(name: str) -> bool:
    """True when an environment variable's NAME says it holds a credential."""
    upper = name.upper()
    if upper in _NAME_ALLOW:
        return False
    return bool(_NAME.search(upper))


def _entropy(text: str) -> float:
    counts: Dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    n = float(len(text))
    return -sum((c / n) * math.log(c / n, 2) for c in counts.values())


def high_entropy(text: str) -> bool:
    """A long run mixing upper case, lower case and digits with high entropy: a generated key.

    Digests (lower-case hex), paths, version strings and flag lists have at most two of the three
    character classes or low entropy, so they are kept."""
    for seg in _SEGMENTS.split(text):
        if len(seg) < 20:
            continue
        if not (re.search(r"[a-z]", seg) and re.search(r"[A-Z]", seg) and re.search(r"[0-9]", seg)):
            continue
        if _entropy(seg) >= 3.5:
            return True
    return False


# A base64 run (with '+' or '/', e.g. an AWS secret access key) that does not continue a path: high_entropy
# splits at '/', so such a key would fall apart into short, harmless-looking pieces.
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9][A-Za-z0-9+/]{29,}={0,2}")


def _base64_secret(text: str) -> bool:
    for m in _BASE64_RUN.finditer(text):
        run = m.group()
        if "/" not in run and "+" not in run:
            continue  # no separator: high_entropy judges it whole
        if re.search(r"[a-z]", run) and re.search(r"[A-Z]", run) and re.search(r"[0-9]", run) and _entropy(run) >= 4.4:
            return True
    return False


def secret_value(text: str) -> Optional[str]:
    """The reason a VALUE looks like a credential, whatever the variable's name (a known token, a URL with a
    password, a long high-entropy run, a base64 key included), or None. Credential-named parameters and flags
    inside a value (password=..., password:..., --password ...) are redacted by scrub(), keeping the rest."""
    if _TOKEN.search(text):
        return "value matches a credential pattern"
    if high_entropy(text) or _base64_secret(text):
        return "value is a long high-entropy string"
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    """Undecodable bytes (os.environ, file names) arrive as lone surrogates, which no UTF-8 file can hold:
    show them as \\xNN escapes instead."""
    if _SURROGATE.search(text):
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        text = _SURROGATE.sub("?", text)
    text = _TOKEN.sub(REDACTED, text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _PAIR.sub(_redact_pair, text)
    text = _COLON_PAIR.sub(_redact_pair, text)
    return _FLAG.sub(_redact_flag, text)


def scrub(obj: Any) -> Any:
    """Copy of a JSON-able object with every credential-looking substring replaced by <redacted> and
    undecodable bytes escaped."""
    if isinstance(obj, str):
        return _clean(obj)
    if isinstance(obj, dict):
        return {scrub(k): scrub(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v) for v in obj]
    return obj


HOST, USER, HOME = "<host>", "<user>", "<home>"


def identity(environ: Dict[str, str], hostname: str) -> Dict[str, str]:
    """What `anonymize` replaces on this machine: the host name (as the report recorded it), the user name
    and the home folder."""
    import os

    out: Dict[str, str] = {"host": hostname}
    try:
        import pwd

        entry = pwd.getpwuid(os.getuid())
        out["user"], out["home"] = entry.pw_name, entry.pw_dir
    except (ImportError, KeyError, OSError):
        pass
    out["user"] = environ.get("USER") or environ.get("LOGNAME") or out.get("user", "")
    out["home"] = environ.get("HOME") or out.get("home", "")
    return out


def anonymize(obj: Any, who: Dict[str, str]) -> Any:
    """Copy of a JSON-able object whose values name no one: the home folder (as a path prefix) becomes <home>;
    the user name and the host name become <user> and <host> where they are a whole value or a path
    component (/srv/alice/data). Keys, and words inside other text, are left alone: a user called `gpu`
    must not rename the gpu section. Values too short or too general to replace safely (a one-letter name,
    the home folder /) are left alone."""
    home = (who.get("home") or "").rstrip("/")
    home_re = re.compile(re.escape(home) + r"(?=/|$|[\s:;,\"'])") if len(home) > 1 else None
    names: List[Tuple[str, str, Any]] = []
    for key, placeholder in (("user", USER), ("host", HOST)):
        word = who.get(key) or ""
        if len(word) >= 2:
            names.append((word, placeholder, re.compile(r"(?<=/)" + re.escape(word) + r"(?=/|$)")))

    def text(value: str) -> str:
        for word, placeholder, _ in names:
            if value == word:
                return placeholder
        if home_re is not None:
            value = home_re.sub(HOME, value)
        for _, placeholder, component in names:
            if "/" in value:
                value = component.sub(placeholder, value)
        return value

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            return text(node)
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(obj) if (home_re is not None or names) else obj
