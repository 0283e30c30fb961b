"""The ``kwire`` console script's dispatch and the ``api-versions`` tool against server.net."""

from __future__ import annotations

import json

import pytest
import trio

from kwire.api_keys import ApiKey
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.api_versions_response import FinalizedFeatureKey, SupportedFeatureKey
from messages.generated.describe_quorum_response import DescribeQuorumResponse
from messages.protocol import Request
from messages.runtime import Message
from server.config import Listener
from server.net import FinalizedFeatures, HandlerTable, RequestContext, RunningServer, serve
from tools import cli


async def start(nursery: trio.Nursery) -> RunningServer:
    async def dq(request: Request, ctx: RequestContext) -> Message:
        return DescribeQuorumResponse()

    table = HandlerTable(
        supported=[SupportedFeatureKey("kraft.version", 0, 1), SupportedFeatureKey("metadata.version", 1, 22)],
        finalized=FinalizedFeatures(3, [FinalizedFeatureKey("metadata.version", 21, 21)]),
    )
    table.register(ApiKey.DESCRIBE_QUORUM, (0, 2), dq)
    table.register(ApiKey.VOTE, (0, 1), dq)
    running: RunningServer = await nursery.start(
        lambda task_status: serve([Listener("C", "127.0.0.1", 0)], table, task_status=task_status)
    )
    return running


async def test_api_versions_json(nursery: trio.Nursery, capsys: pytest.CaptureFixture[str]) -> None:
    running = await start(nursery)
    address = f"127.0.0.1:{running.port()}"
    status = await trio.to_thread.run_sync(
        cli.main, ["api-versions", "--bootstrap-controller", address, "--json"]
    )
    assert status == 0
    view = json.loads(capsys.readouterr().out)
    assert view["node"] == address
    assert view["apiVersionsVersion"] == ApiVersionsRequest.HIGHEST_VERSION
    assert view["errorCode"] == 0
    assert [(k["apiKey"], k["name"], k["minVersion"], k["maxVersion"], k["usableVersion"]) for k in view["apiKeys"]] == [
        (18, "ApiVersions", 0, ApiVersionsRequest.HIGHEST_VERSION, ApiVersionsRequest.HIGHEST_VERSION),
        (52, "Vote", 0, 1, 1),
        (55, "DescribeQuorum", 0, 2, 2),
    ]
    assert view["supportedFeatures"] == [
        {"name": "kraft.version", "minVersion": 0, "maxVersion": 1},
        {"name": "metadata.version", "minVersion": 1, "maxVersion": 22},
    ]
    assert view["finalizedFeaturesEpoch"] == 3
    assert view["finalizedFeatures"] == [{"name": "metadata.version", "minVersionLevel": 21, "maxVersionLevel": 21}]


async def test_api_versions_text(nursery: trio.Nursery, capsys: pytest.CaptureFixture[str]) -> None:
    running = await start(nursery)
    address = f"127.0.0.1:{running.port()}"
    status = await trio.to_thread.run_sync(cli.main, ["api-versions", "--bootstrap-server", address])
    assert status == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{address} -> ("
    assert "\tVote(52): 0 to 1 [usable: 1]," in out
    assert "\tDescribeQuorum(55): 0 to 2 [usable: 2]," in out
    assert "\tmetadata.version: 21 to 21" in out


async def test_api_versions_unreachable(capsys: pytest.CaptureFixture[str]) -> None:
    with trio.socket.socket() as s:
        await s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    status = await trio.to_thread.run_sync(
        cli.main, ["api-versions", "--bootstrap-controller", f"127.0.0.1:{port}"]
    )
    assert status == 1
    assert "cannot connect" in capsys.readouterr().err


def test_missing_command_module_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "server-start", ("tools.module_that_is_not_there", "x"))
    assert cli.main(["server-start", "--config", "x"]) == 2
    err = capsys.readouterr().err
    assert "not available" in err and "tools.module_that_is_not_there" in err
    # Other commands are unaffected.
    with pytest.raises(SystemExit) as info:
        cli.main(["api-versions", "--help"])
    assert info.value.code == 0
    assert "--bootstrap-controller" in capsys.readouterr().out


def test_top_level_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "api-versions" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["no-such-command"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out
