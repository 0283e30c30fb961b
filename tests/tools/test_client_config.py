"""The tools' client security (tools.client_config) from Kafka client properties, and
``kwire metadata-quorum --command-config`` refusing a file it cannot use. The tools against a
SASL_SSL quorum, beside the stock tool, are in compat/test_secured_cluster.py."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from server.config import ConfigError
from server.net.sasl import SaslClient
from tools import cli
from tools.client_config import PLAINTEXT, client_security, load_client_security

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s3cret";'


def test_plaintext_is_the_default() -> None:
    assert client_security({}) == PLAINTEXT
    assert load_client_security(None) == PLAINTEXT
    assert client_security({"security.protocol": "plaintext", "sasl.mechanism": "PLAIN"}) == PLAINTEXT


def test_sasl_ssl_gives_the_login_and_a_context_that_checks_the_server(pki: dict[str, Path]) -> None:
    security = client_security({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config":
        PLAIN_JAAS.replace("plain.PlainLoginModule", "scram.ScramLoginModule"),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki["ca"]),
    })
    assert security.sasl == SaslClient("SCRAM-SHA-512", "admin", "s3cret")
    assert security.ssl_context is not None
    assert security.ssl_context.check_hostname and security.ssl_context.verify_mode == ssl.CERT_REQUIRED
    unchecked = client_security({"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                 "ssl.truststore.location": str(pki["ca"]),
                                 "ssl.endpoint.identification.algorithm": ""})
    assert unchecked.sasl is None and unchecked.ssl_context is not None
    assert not unchecked.ssl_context.check_hostname


def test_sasl_plaintext_has_no_tls() -> None:
    security = client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                "sasl.jaas.config": PLAIN_JAAS})
    assert security.sasl == SaslClient("PLAIN", "admin", "s3cret") and security.ssl_context is None


@pytest.mark.parametrize(("props", "key"), [
    ({"security.protocol": "TLS"}, "security.protocol"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": PLAIN_JAAS}, "sasl.mechanism"),  # GSSAPI
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required;"}, "sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/nonexistent/ca.pem"},
     "ssl.truststore.location"),
])
def test_unusable_settings_name_their_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        client_security(props)
    assert raised.value.key == key, raised.value


def test_the_tool_refuses_a_command_config_it_cannot_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n", encoding="utf-8")
    status = cli.main(["metadata-quorum", "--bootstrap-controller", "localhost:1", "--command-config", str(config),
                       "describe", "--status"])
    assert status == 1
    err = capsys.readouterr().err
    assert f"--command-config {config}: sasl.mechanism: GSSAPI is not supported" in err, err
    missing = tmp_path / "missing.properties"
    assert cli.main(["metadata-quorum", "--bootstrap-controller", "localhost:1", "--command-config", str(missing),
                     "describe", "--status"]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_health_refuses_a_command_config_it_cannot_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", encoding="utf-8")
    assert cli.main(["health", "--bootstrap-controller", "localhost:1", "--command-config", str(config)]) == 2
    assert "sasl.jaas.config" in capsys.readouterr().err
