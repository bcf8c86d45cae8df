"""Hostile inputs read in-process: image configs of the wrong shape from a loopback registry, and credentials
in the shapes the probe's redaction must catch (or leave alone). The same inputs through the real console
script, under a timeout and a memory bound: tests/cli/test_hostile_inputs.py."""

from __future__ import annotations

import pytest

from envpin.errors import RegistryError
from envpin.probe import secrets
from envpin.registry.client import RegistryClient
from tests.hostile_registry import HostileRegistry, image_routes, image_with_config

REPO, TAG = "nvidia/tensorflow", "20.02-tf2-py3"


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ({"config": ["Env"]}, "'config' is not an object"),
        ({"config": {"Env": "A=1"}}, "'config.Env' is not a list of strings"),
        ({"config": {"Env": [1, None]}}, "'config.Env' is not a list of strings"),
        ({"config": {"Labels": ["a=b"]}}, "'config.Labels' is not an object of strings"),
        ({"created": 20200220, "config": {}}, "'created' is not a string"),
        ([{"config": {}}], "is not a JSON object"),
        ("a string", "is not a JSON object"),
    ],
)
def test_image_configs_of_the_wrong_shape_are_one_registry_error(config: object, needle: str) -> None:
    routes = image_routes(REPO, TAG, image_with_config(config))
    with HostileRegistry(routes) as reg, pytest.raises(RegistryError) as info:
        RegistryClient(credentials=lambda name: None).image_config(f"{reg.host}/{REPO}:{TAG}")
    assert needle in info.value.message and info.value.hint and "\n" not in info.value.message


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("https://ci:pa/ss%2Fw0rd@registry.example.invalid/v2", "pa/ss"),
        ("--num_workers 4 --password s3cretpw --verbose", "s3cretpw"),
        ("-access-token tok3nvalue -x", "tok3nvalue"),
        ("user=alice password:pw4lice, region=eu", "pw4lice"),
        ("{'apiKey':k3yvalue}", "k3yvalue"),
        ('--password "hunter2xyz" -v', "hunter2xyz"),
        ("--token 'two words' --x 1", "words"),
        ('password="two words"', "words"),
        ("{'secret': 'a b c'}", " c"),
        ("Authorization: token abcdef123456", "abcdef123456"),
        ("Authorization=Digest abcdef123456", "abcdef123456"),
        ("env PGPASSWORD=pgsecret1 psql", "pgsecret1"),
        ("--client-secret=cl1ent --dbPassword=dbpw", "cl1ent"),
        ("--client-secret=cl1ent --dbPassword=dbpw", "dbpw"),
        ("https://user:p@ssw0rd@pypi.example.invalid/simple", "ssw0rd"),
    ],
)
def test_credentials_inside_values_are_redacted(text: str, secret: str) -> None:
    out = secrets.scrub(text)
    assert secret not in out and secrets.REDACTED in out


@pytest.mark.parametrize("value", ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "https://u:p/q@host.example.invalid/x"])
def test_credential_values_under_innocent_names_are_judged_by_value(value: str) -> None:
    assert secrets.secret_value(value) is not None


@pytest.mark.parametrize(
    "text",
    [
        "http://host:8080/path@x",
        "gpu:NVIDIA A100;cc=8.0",
        "--xla_dump_to /tmp/x",
        "/opt/Nvidia/Cuda12/Lib64/Stubs/DeepLearningKit/X86",
        "--epochs 3 --lr 0.1",
    ],
)
def test_what_only_resembles_a_credential_is_kept(text: str) -> None:
    assert secrets.scrub(text) == text and secrets.secret_value(text) is None
