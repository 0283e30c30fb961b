"""SCRAM credentials and client quotas (server.controller.scram, server.controller.client_quotas)
where the differential test against a stock controller (compat/test_security_rpcs.py) does not
reach: old metadata.versions, replay, snapshots, the key derivation, and the answer to a
DescribeUserScramCredentials for every user (which Kafka 4.4.0 never answers)."""

from __future__ import annotations

import base64
import hashlib

from kwire.errors import Errors
from messages.generated.alter_client_quotas_request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from messages.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from messages.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.remove_user_scram_credential_record import RemoveUserScramCredentialRecord
from messages.metadata import encode_record
from server.controller.cluster import ReplayError
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.responses import describe_user_scram_credentials_response
from server.controller.scram import SCRAM_LEVEL, ScramControlManager, scram_credential
from storage.scram_args import parse_scram_argument
from tests.controller.test_host import Harness


def _upsert(name: str, mechanism: int = 1) -> AlterUserScramCredentialsRequest:
    return AlterUserScramCredentialsRequest(deletions=[], upsertions=[ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=4096, salt=b"saltsalt", salted_password=b"k" * 32)])


def test_keys_are_derived_as_rfc_5802_and_kafka_derive_them() -> None:
    salted = hashlib.pbkdf2_hmac("sha256", b"alice-secret", b"saltsalt", 4096)
    assert base64.b64encode(salted).decode() == "NixYaNF54OHcJ19OgeCK/3dETG61zTPrdrnQsT2R8zM="
    credential = scram_credential(1, salted, b"saltsalt", 4096)
    assert base64.b64encode(credential.stored_key).decode() == "9nZFwTJ4fi7MvIBth8HcTK03YhPTLjRekJvixhQKYKw="
    assert base64.b64encode(credential.server_key).decode() == "eEn2KsqSl90Mzs/hJgEyQIx+Wbl8GqPXSfIbbCTV2Ag="


def test_below_metadata_version_3_5_iv2_every_user_is_refused() -> None:
    records, results = ScramControlManager().alter(_upsert("alice"), SCRAM_LEVEL - 1)
    assert records == []
    assert [(user, error.error) for user, error in results if error is not None] == [("alice", Errors.UNSUPPORTED_VERSION)]
    records, results = ScramControlManager().alter(_upsert("alice"), SCRAM_LEVEL)
    assert len(records) == 1 and results == [("alice", None)]


def test_removing_a_credential_not_held_fails_replay() -> None:
    image = ScramControlManager()
    try:
        image.replay(RemoveUserScramCredentialRecord(name="nobody", mechanism=1))
    except ReplayError:
        pass
    else:
        raise AssertionError("the removal of an unknown credential replayed")


def test_credentials_and_quotas_survive_a_snapshot() -> None:
    controller = ControlManagers(bootstrap=())
    controller.feature_levels["metadata.version"] = SCRAM_LEVEL
    records, _ = controller.scram.alter(_upsert("alice"), SCRAM_LEVEL)
    more, _ = controller.scram.alter(_upsert("alice", 2), SCRAM_LEVEL)
    quota_records, results = controller.client_quotas.alter(AlterClientQuotasRequest(entries=[EntryData(
        entity=[EntityData(entity_type="user", entity_name="bob"), EntityData(entity_type="client-id", entity_name=None)],
        ops=[OpData(key="producer_byte_rate", value=1024.0, remove=False)])], validate_only=False))
    assert results == [((("client-id", None), ("user", "bob")), None)]
    for record, version in [*records, *more, *quota_records]:
        controller.replay(encode_record(record, version))
    again = ControlManagers(bootstrap=())
    again.reset([encode_record(r, v) for r, v in controller.snapshot_records()])
    assert again.scram.credentials == controller.scram.credentials and len(again.scram.credentials) == 2
    assert again.client_quotas.quotas == controller.client_quotas.quotas
    removal, _ = again.client_quotas.alter(AlterClientQuotasRequest(entries=[EntryData(
        entity=[EntityData(entity_type="client-id", entity_name=None), EntityData(entity_type="user", entity_name="bob")],
        ops=[OpData(key="producer_byte_rate", value=0.0, remove=True)])], validate_only=False))
    for record, version in removal:
        again.replay(encode_record(record, version))
    assert again.client_quotas.quotas == {}


def test_a_describe_of_every_user_gets_an_answer() -> None:
    """Kafka 4.4.0's controller throws building this error (its ``getErrorResponse`` walks the
    null user list) and never answers; kwire answers the error with no results (DEVIATIONS)."""
    response = describe_user_scram_credentials_response(
        DescribeUserScramCredentialsRequest(users=None), 0, ApiError(Errors.UNKNOWN_SERVER_ERROR, None))
    assert response.error_code == Errors.UNKNOWN_SERVER_ERROR and response.results == []


def test_bootstrapped_credentials_reach_the_log_at_activation() -> None:
    """``kwire storage format --add-scram`` puts UserScramCredentialRecords among the bootstrap
    records; the first active controller appends them with the feature levels."""
    record = parse_scram_argument('SCRAM-SHA-512=[name=boot,salt="c2FsdA==",iterations=4096,password=pw]')
    node = Harness(bootstrap=[(FeatureLevelRecord(name="metadata.version", feature_level=21), 0), (record, 0)])
    credential = node.host.controller.scram.credentials[("boot", 2)]
    assert credential == scram_credential(2, hashlib.pbkdf2_hmac("sha512", b"pw", b"salt", 4096), b"salt", 4096)
