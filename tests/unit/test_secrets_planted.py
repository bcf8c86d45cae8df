"""Forty-odd secrets planted in the environment in the forms they take in practice never reach the JSON,
the Markdown or stdout; --anonymize replaces host name, user name and home folder everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.probe import envvars, secrets

# name -> (value, the part of it that must never appear)
PLANTED: dict[str, tuple[str, str]] = {
    "TF_GCS_CRED": ("s3cr3tv4lu3", "s3cr3tv4lu3"),
    "NCCL_PW": ("hunter2hunter2", "hunter2hunter2"),
    "TF_BEARER": ("Bearer abc.def.ghi-jkl", "abc.def.ghi-jkl"),
    "TF_SAS": ("https://acct.blob.core.windows.net/c?sv=2020&sig=Zm9vYmFyYmF6cXV4", "Zm9vYmFyYmF6cXV4"),
    "TF_CONFIG": ('{"cluster": {}, "task": {"type": "worker"}, "token": "tok3n-in-json"}', "tok3n-in-json"),
    "PYTHON_LOGIN": ("user:pass-word-9", "pass-word-9"),
    "TF_CREDS": ("plainsecretvalue", "plainsecretvalue"),
    "XLA_FLAGS": ("--xla_dump_to=/tmp/x --some_token=flagtok3n7", "flagtok3n7"),
    "TF_SERVING_PASSWORD": ("correct-horse-battery-staple-42", "battery-staple"),
    "HOROVOD_SECRET": ("lowentropy", "lowentropy"),
    "CUDA_API_KEY": ("k3y-v4lue", "k3y-v4lue"),
    "NCCL_AUTH_HEADER": ("Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
    "TF_PRIVATE_KEY": ("-----BEGIN RSA PRIVATE KEY-----MIIE", "BEGIN RSA PRIVATE KEY"),
    "OMP_SCHEDULE": ("Vq3Lm9Xz7Rt2Wp5Ks8Nd4Fh6Jb1Gc0Ye", "Vq3Lm9Xz7Rt2Wp5Ks8Nd4"),
    "NCCL_SOCKET_IFNAME": ("ghp_" + "Zx9Cv8Bn7Mm6Lk5Jh4Gf3Dd2Ss1Aa0Qq", "Zx9Cv8Bn7Mm6"),
    "CUDA_CACHE_KEY_ID": ("AKIA" + "IOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    "TF_JWT": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmVyIn0.SflKxwRJSMeKKF2QT4fwpM", "SflKxwRJSMeKKF2QT4fwpM"),
    "TF_HUB_URL": ("https://deploy:Pa55w0rdXyz@hub.example.invalid/m", "Pa55w0rdXyz"),
    "PYTHONSTARTUP_URL": ("https://x.example.invalid/s?token=qu3rytok3n", "qu3rytok3n"),
    "TF_DATASET_URL": ("https://d.example.invalid/?a=1&password=pa55inquery", "pa55inquery"),
    "NCCL_DEBUG_SUBSYS": ("INIT --api_key=flagk3yv4l", "flagk3yv4l"),
    "TF_SESSION_ID": ("sessval123", "sessval123"),
    "TF_COOKIE": ("c00kieval", "c00kieval"),
    "TF_SLACK_HOOK": ("xoxb-" + "1234567890-abcdefghij", "1234567890-abcdefghij"),
    "TF_HF": ("hf_" + "Q8w7E6r5T4y3U2i1O0pAsDfGh", "Q8w7E6r5T4y3U2i1O0pAsDfGh"),
    "TF_OPENAI": ("sk-" + "abcdefghijklmnopqrstuvwxyz12", "abcdefghijklmnopqrstuvwxyz12"),
    "TF_GITLAB": ("glpat-" + "abcdefghij0123456789", "abcdefghij0123456789"),
    "TF_GOOGLE": ("AIza" + "SyA1234567890abcdefghijklmnopqrstu", "SyA1234567890abcdefghijklmnop"),
    "TF_NPM": ("npm_" + "abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
    "TF_GH_PAT": ("github_pat_" + "11ABCDEFG0123456789_abcdefghij", "11ABCDEFG0123456789_abc"),
    "MKL_WEBHOOK": ("https://hooks.example.invalid/T000/B000/XXXX", "T000/B000/XXXX"),
    "TF_DSN": ("postgres://u:dsnpa55@db/x", "dsnpa55"),
    "TF_PASS": ("passval77", "passval77"),
    "TF_SALT": ("saltval88", "saltval88"),
    "TF_PAT": ("patval99", "patval99"),
    "TF_SIGNATURE": ("sigval111", "sigval111"),
    "TF_PASSPHRASE": ("phrase of words", "phrase of words"),
    "KMP_SETTINGS_JSON": ('{"auth": "jsonauthval"}', "jsonauthval"),
    "TF_STORAGE_OPTS": ("account=a;sas=sasval222;region=x", "sasval222"),
    "TF_GRPC": ("grpc://h:1?credential=credval333", "credval333"),
    "TF_REDIS": ("redis://:redispa55@cache:6379/0", "redispa55"),
    "OMP_NOTE": ("Authorization: Bearer hdrtok3n.value", "hdrtok3n.value"),
}


def test_the_planted_variables_are_recorded_ones() -> None:
    """Otherwise the test would pass by leaving them out of the report."""
    assert len(PLANTED) >= 40
    assert all(envvars.relevant(name) for name in PLANTED)


def test_scrub_keeps_what_is_not_a_secret() -> None:
    for text in (
        "--xla_gpu_autotune_level=0",
        "sha256:" + "ab" * 32,
        "/usr/lib/x86_64-linux-gnu",
        "TF_DETERMINISTIC_OPS=1",
        "key_value_store=off",
        "https://pypi.org/simple",
    ):
        assert secrets.scrub(text) == text, text


@pytest.mark.parametrize(
    "text",
    [
        "/opt/tokenizers:/usr/local/cuda/lib64",  # a path list: ':' followed by '/' is not a NAME: VALUE pair
        "sigmoid_threshold=0.5",
        "session_inter_op_parallelism_threads=1",
        "Token embeddings are cached",
        "Basic training data",
        "cache_key=1",
        "--xla_gpu_deterministic_ops=true",
    ],
)
def test_settings_that_only_look_like_credentials_are_kept(text: str) -> None:
    assert secrets.scrub(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "a" * 200_000,
        "token" * 40_000,
        "=" * 200_000,
        "-" * 200_000,
        "cred" * 50_000,
        "a:" * 100_000,
        "http" * 50_000,
        "x=y&" * 50_000,
    ],
)
def test_adversarial_strings_are_scrubbed(text: str) -> None:
    """Every pattern starts at a word boundary and has no nested repetition, so these take linear time
    (before, '-' * 10_000 took 13 s): the call returns, and nothing here is a credential."""
    assert secrets.scrub(text) == text


def test_anonymize_never_renames_keys_or_words_inside_text() -> None:
    report = {
        "gpu": {"device_class": {"value": "gpu:NVIDIA A100;cc=8.0"}},
        "container": {"runtime": {"value": "docker run by gpu"}},
    }
    assert secrets.anonymize(report, {"user": "gpu", "host": "docker", "home": "/"}) == report


def planted_nccl_conf() -> str:
    """Every planted secret as an NCCL configuration file has it: as a value, as a name, in a comment, in a
    line NCCL skips, and behind host-identifying variables."""
    lines = [f"{name}={value}" for name, (value, _) in PLANTED.items()]
    lines += [f"{secret}=1" for _, secret in PLANTED.values() if "=" not in secret and "\n" not in secret]
    lines += [f"# {value}" for value, _ in PLANTED.values()]
    lines += [f"{value}" for value, _ in PLANTED.values() if "=" not in value]
    return "\n".join(lines) + "\n"


def test_planted_secrets_in_nccl_conf_never_reach_the_report(tmp_path: Path) -> None:
    from envpin.probe import collect, to_json, to_markdown

    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text(planted_nccl_conf())
    report = collect(environ={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert report["distributed"]["nccl.conf.home"]["value"]["settings"]  # the file was read and recorded
    blobs = {"json": to_json(report), "markdown": to_markdown(report)}
    leaks = [(name, where) for name, (_, secret) in PLANTED.items() for where, text in blobs.items() if secret in text]
    assert leaks == []
