"""Long-running operations as MCP tasks (#28), through a real Envoy and the demo upstream's
ExportService and google.longrunning.Operations: the task in each era (the TypeScript SDK's
2025-11-25 tasks, the Python SDK with the 2026-07-28 extension, raw JSON-RPC for the rest),
callers without tasks, cancellation, refused task ids with no upstream call, the stats and the
access log, and two Envoys answering each other's polls."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import subprocess
import time
from typing import Any, Literal

import httpx2
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import Field

from filter_build import demo_plugin
from mcp_client import MODERN_VERSION, Mcp, modern_meta
from processes import REPO, Envoy, Upstream, wait_until
from test_scale_out import RoundRobin

TS_CLIENT = REPO / "test-harness/clients/typescript"
EXTENSION = "io.modelcontextprotocol/tasks"
KEY = bytes(range(32))
EXPORT = "ExportService_ExportCatalog"
GET_OPERATION = "/google.longrunning.Operations/GetOperation"
CANCEL_OPERATION = "/google.longrunning.Operations/CancelOperation"


def tasks_plugin(keys: list[bytes] | None = None, timeout_ms: int = 4000) -> dict[str, Any]:
    plugin = demo_plugin()
    plugin["services"]["demo.exports.v1.ExportService"] = {"cluster": "demo_grpc", "timeout_ms": timeout_ms}
    plugin["tasks"] = {"poll_interval_ms": 100, "ttl_ms": 60000, "wait_poll_interval_ms": 100}
    if keys is not None:
        plugin["tasks"]["keys"] = [base64.b64encode(key).decode() for key in keys]
    return plugin


@pytest.fixture(scope="module")
def tasks_envoy(upstream: Upstream):
    # Two workers: a task made on one is polled on whichever takes the next request.
    proxy = Envoy(upstream, tasks_plugin([KEY]), name="envoy-tasks", workers=2).start()
    yield proxy
    proxy.stop()


@pytest.fixture
def mcp(tasks_envoy: Envoy, upstream: Upstream) -> Mcp:
    upstream.reset()
    return Mcp(tasks_envoy.mcp_url)


def legacy(mcp: Mcp, method: str, params: dict[str, Any], version: str = "2025-11-25") -> dict[str, Any]:
    mcp.next_id += 1
    response = mcp.post({"jsonrpc": "2.0", "id": mcp.next_id, "method": method, "params": params},
                        headers={"mcp-protocol-version": version})
    assert response.status_code == 200, response.text
    return response.json()


def modern_meta_with_tasks() -> dict[str, Any]:
    meta = modern_meta()
    meta["io.modelcontextprotocol/clientCapabilities"] = {"extensions": {EXTENSION: {}}}
    return meta


def modern_task(mcp: Mcp, method: str, task_id: str, declared: bool = True) -> httpx2.Response:
    meta = modern_meta_with_tasks() if declared else modern_meta()
    return mcp.modern(method, {"taskId": task_id, "_meta": meta}, headers={"mcp-name": task_id})


def mint(operation: str, tool: str = EXPORT, created_ms: int | None = None, identity: bytes = b"",
         key: bytes = KEY) -> str:
    """A task id laid out as filter/core/src/tasks/task_id.rs writes one."""
    created_ms = int(time.time() * 1000) if created_ms is None else created_ms
    body = (bytes([1]) + created_ms.to_bytes(8, "big") + hashlib.sha256(identity).digest()[:16]
            + bytes([len(tool)]) + tool.encode() + len(operation).to_bytes(2, "big") + operation.encode())
    mac = hmac.new(key, b"switchblade task id\0" + body, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(body + mac).rstrip(b"=").decode()


def legacy_task(mcp: Mcp, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = legacy(mcp, "tools/call", {"name": tool, "arguments": arguments, "task": {}})
    return body["result"]["task"]


def poll_legacy(mcp: Mcp, task_id: str, until: str = "completed") -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        task = legacy(mcp, "tasks/get", {"taskId": task_id})["result"]
        if task["status"] == until or time.monotonic() > deadline:
            return task
        time.sleep(task["pollInterval"] / 1000)


def test_task_tools_are_listed_as_tasks_with_the_operations_response(mcp: Mcp) -> None:
    initialize = legacy(mcp, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                            "clientInfo": {"name": "t", "version": "1"}})
    assert initialize["result"]["capabilities"]["tasks"] == {"cancel": {}, "requests": {"tools": {"call": {}}}}
    tools = {tool["name"]: tool for tool in legacy(mcp, "tools/list", {})["result"]["tools"]}
    export = tools[EXPORT]
    assert export["execution"] == {"taskSupport": "optional"}
    assert list(export["outputSchema"]["properties"]) == ["uri", "item_count", "item_ids"]
    assert "Runs as a task" in export["description"]
    assert "execution" not in tools["ExportService_PurgeCaches"], "no operation_info: a plain tool"
    discover = mcp.modern("server/discover").json()
    assert discover["result"]["capabilities"]["extensions"] == {EXTENSION: {}}


def test_a_2025_11_25_task_is_made_polled_and_read(mcp: Mcp, upstream: Upstream) -> None:
    task = legacy_task(mcp, EXPORT, {"query": "stove", "steps": 2})
    assert (task["status"], task["ttl"], task["pollInterval"]) == ("working", 60000, 100)
    assert '"stage":"exporting"' in task["statusMessage"]
    task_id = task["taskId"]
    done = poll_legacy(mcp, task_id)
    assert done["status"] == "completed" and done["taskId"] == task_id
    result = legacy(mcp, "tasks/result", {"taskId": task_id})["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["item_ids"] == ["2"]
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    calls = upstream.calls()
    assert calls["/demo.exports.v1.ExportService/ExportCatalog"] == 1
    assert calls[GET_OPERATION] >= 3


def test_an_operation_that_fails_is_a_completed_task_with_a_tool_error(mcp: Mcp) -> None:
    task_id = legacy_task(mcp, "ExportService_RepriceCatalog", {"currency_code": "USD", "steps": 1})["taskId"]
    assert poll_legacy(mcp, task_id)["status"] == "completed"
    result = legacy(mcp, "tasks/result", {"taskId": task_id})["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text.startswith("demo.exports.v1.ExportService/RepriceCatalog failed with gRPC status FAILED_PRECONDITION (9): "
                           "no exchange rates from EUR to USD\n- ErrorInfo: reason NO_EXCHANGE_RATES in domain exports.demo"), text


def test_cancelling_a_task_in_each_era(mcp: Mcp, upstream: Upstream) -> None:
    task_id = legacy_task(mcp, "ExportService_RebuildIndex", {})["taskId"]
    cancelled = legacy(mcp, "tasks/cancel", {"taskId": task_id})["result"]
    assert (cancelled["taskId"], cancelled["status"]) == (task_id, "cancelled")
    assert poll_legacy(mcp, task_id, until="cancelled")["status"] == "cancelled"
    again = legacy(mcp, "tasks/cancel", {"taskId": task_id})
    assert again["error"]["code"] == -32602
    assert "already in terminal status 'cancelled'" in again["error"]["message"]
    assert upstream.calls()[CANCEL_OPERATION] == 1, "a done task is not cancelled again"

    created = mcp.modern("tools/call", {"name": "ExportService_RebuildIndex", "arguments": {},
                                        "_meta": modern_meta_with_tasks()}).json()["result"]
    assert created["resultType"] == "task"
    ack = modern_task(mcp, "tasks/cancel", created["taskId"])
    assert ack.status_code == 200 and ack.json()["result"]["resultType"] == "complete"
    status = modern_task(mcp, "tasks/get", created["taskId"]).json()["result"]
    assert status["status"] == "cancelled"


def test_typescript_sdk_runs_tasks(tasks_envoy: Envoy, upstream: Upstream) -> None:
    upstream.reset()
    run = subprocess.run(["node", "tasks.mjs", tasks_envoy.mcp_url], cwd=TS_CLIENT, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["protocolVersion"] == "2025-11-25"
    assert seen["capabilities"]["tasks"]["requests"]["tools"]["call"] == {}
    kinds = [message["type"] for message in seen["exported"]]
    assert kinds[0] == "taskCreated" and kinds[-1] == "result" and "taskStatus" in kinds, kinds
    result = seen["exported"][-1]["result"]
    assert result["isError"] is False and result["structuredContent"]["item_ids"] == ["2"]
    repriced = seen["repriced"][-1]
    assert repriced["type"] == "result" and repriced["result"]["isError"] is True
    assert "FAILED_PRECONDITION" in repriced["result"]["content"][0]["text"]
    assert seen["cancelled"]["status"] == "cancelled"
    assert seen["afterCancel"]["status"] == "cancelled"


class GetTaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


class GetTaskRequest(Request[GetTaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: GetTaskParams
    # The tasks extension routes on the task id: it goes in Mcp-Name.
    name_param = "taskId"


class Task(Result):
    task_id: str = Field(alias="taskId")
    status: str
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")
    status_message: str | None = Field(default=None, alias="statusMessage")
    result: dict[str, Any] | None = None


class CreatedTask(Task):
    result_type: Literal["task"] = Field(alias="resultType")


class Tasks(ClientExtension):
    """The 2026-07-28 tasks extension, on the official Python SDK's extension surface: a
    `resultType: "task"` answer to tools/call is polled with tasks/get until it is done."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.seen: list[str] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def resolve(self, created: CreatedTask, context: ClaimContext) -> CallToolResult:
        self.seen.append(created.status)
        task: Task = created
        while task.status == "working":
            await asyncio.sleep((task.poll_interval_ms or 100) / 1000)
            request = GetTaskRequest(params=GetTaskParams(taskId=created.task_id))
            task = await context.session.send_request(request, Task)
            self.seen.append(task.status)
        assert task.status == "completed", task
        return CallToolResult.model_validate(task.result)


async def _python_sdk(url: str) -> dict[str, Any]:
    tasks = Tasks()
    async with Client(url, mode=MODERN_VERSION, extensions=[tasks]) as client:
        exported = await client.call_tool(EXPORT, {"query": "stove", "steps": 2})
        repriced = await client.call_tool("ExportService_RepriceCatalog", {"currency_code": "USD", "steps": 1})
    async with Client(url, mode="legacy") as client:
        waited = await client.call_tool(EXPORT, {"query": "stove", "steps": 3})
    async with Client(url, mode=MODERN_VERSION) as client:
        waited_modern = await client.call_tool(EXPORT, {"steps": 1})
    return {"exported": exported, "repriced": repriced, "seen": tasks.seen, "waited": waited,
            "waited_modern": waited_modern}


def test_python_sdk_follows_a_task_with_the_extension_and_waits_without_it(tasks_envoy: Envoy,
                                                                           upstream: Upstream) -> None:
    upstream.reset()
    seen = asyncio.run(_python_sdk(tasks_envoy.mcp_url))
    assert seen["seen"][0] == "working" and seen["seen"][-1] == "completed", seen["seen"]
    assert seen["exported"].is_error is False
    assert seen["exported"].structured_content["item_ids"] == ["2"]
    assert seen["repriced"].is_error is True
    assert "FAILED_PRECONDITION (9)" in seen["repriced"].content[0].text
    # Without tasks, the gateway polled and answered with the result itself.
    assert seen["waited"].is_error is False and seen["waited"].structured_content["item_ids"] == ["2"]
    assert seen["waited_modern"].is_error is False
    assert upstream.calls()[GET_OPERATION] >= 2 + 1 + 3 + 1


def test_a_caller_without_tasks_is_told_the_operation_still_runs_at_the_deadline(upstream: Upstream) -> None:
    upstream.reset()
    proxy = Envoy(upstream, tasks_plugin([KEY], timeout_ms=1200), name="envoy-tasks-deadline").start()
    try:
        started = time.monotonic()
        result = Mcp(proxy.mcp_url).request("tools/call", {"name": "ExportService_RebuildIndex", "arguments": {}})
        took = time.monotonic() - started
        assert 0.9 < took < 3, took
        assert result["result"]["isError"] is True
        text = result["result"]["content"][0]["text"]
        assert "demo.exports.v1.ExportService/RebuildIndex is still running after 1200 ms" in text, text
        assert "operations/rebuild-" in text
        assert upstream.calls()[GET_OPERATION] >= 5
    finally:
        proxy.stop()


@pytest.mark.parametrize("case", ["malformed", "forged", "expired", "other_tool", "other_caller"])
def test_refused_task_ids_reach_no_upstream(mcp: Mcp, upstream: Upstream, case: str) -> None:
    operation = "operations/export-1"
    task_id = {
        "malformed": "not-a-task-id",
        "forged": mint(operation, key=bytes(32)),
        "expired": mint(operation, created_ms=int(time.time() * 1000) - 61_000),
        "other_tool": mint(operation, tool="UserService_GetUser"),
        "other_caller": mint(operation, identity=b'["idp","bob"]'),
    }[case]
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        body = legacy(mcp, method, {"taskId": task_id})
        assert body["error"]["code"] == -32602, body
    response = modern_task(mcp, "tasks/get", task_id)
    assert (response.status_code, response.json()["error"]["code"]) == (400, -32602)
    assert upstream.total_calls() == 0, upstream.calls()


def test_a_modern_client_without_the_extension_gets_32021(mcp: Mcp, upstream: Upstream) -> None:
    task_id = mint("operations/unknown-1")
    response = modern_task(mcp, "tasks/get", task_id, declared=False)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
    # The same id, declared: served.
    assert modern_task(mcp, "tasks/get", task_id).json()["error"]["code"] == -32602, "unknown to the upstream"
    assert upstream.calls() == {GET_OPERATION: 1}


def test_stats_and_access_log(tasks_envoy: Envoy, mcp: Mcp) -> None:
    request_id = "tasks-access-log"
    task_id = legacy_task(mcp, EXPORT, {"steps": 1})["taskId"]
    poll_legacy(mcp, task_id)
    mcp.post({"jsonrpc": "2.0", "id": 99, "method": "tasks/get", "params": {"taskId": task_id}},
             headers={"mcp-protocol-version": "2025-11-25", "x-request-id": request_id})
    legacy(mcp, "tasks/get", {"taskId": "forged"})

    def entry() -> dict[str, Any] | None:
        lines = tasks_envoy.access_log_path.read_text().splitlines() if tasks_envoy.access_log_path.exists() else []
        return next((json.loads(line) for line in lines if json.loads(line).get("request_id") == request_id), None)

    wait_until(lambda: entry() is not None, "the access log entry")
    logged = entry()
    assert logged is not None
    assert logged["mcp_method"] == "tasks/get"
    assert logged["operation"].startswith("operations/export-"), logged
    text = httpx2.get(f"{tasks_envoy.admin_url}/stats/prometheus", timeout=5).text
    lines = text.splitlines()
    assert any("switchblade_task_steps{" in line and f'tool="{EXPORT}"' in line and 'method="tasks/get"' in line
               and 'outcome="completed"' in line for line in lines), [line for line in lines if "task_steps" in line]
    assert any("switchblade_task_steps{" in line and 'method="tools/call"' in line and 'outcome="task_created"' in line
               for line in lines)
    assert any("switchblade_task_refusals{" in line and 'reason="malformed"' in line for line in lines)


@pytest.fixture(scope="module")
def replicas(upstream: Upstream):
    first = Envoy(upstream, tasks_plugin([KEY]), name="tasks-replica-a").start()
    second = Envoy(upstream, name="tasks-replica-b", shared_ecds=first).start()
    front = RoundRobin([first, second]).start()
    yield first, second, front
    front.stop()
    second.stop()
    first.stop()


def task_steps(envoy: Envoy) -> int:
    text = httpx2.get(f"{envoy.admin_url}/stats/prometheus", timeout=5).text
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if "switchblade_task_steps{" in line and not line.startswith("#"))


def test_two_envoys_answer_each_others_polls(replicas: tuple[Envoy, Envoy, RoundRobin], upstream: Upstream) -> None:
    first, second, front = replicas
    upstream.reset()
    mcp = Mcp(front.mcp_url)
    before = (task_steps(first), task_steps(second))
    task_id = legacy_task(mcp, EXPORT, {"steps": 4})["taskId"]
    assert poll_legacy(mcp, task_id)["status"] == "completed"
    assert legacy(mcp, "tasks/result", {"taskId": task_id})["result"]["isError"] is False
    after = (task_steps(first), task_steps(second))
    assert after[0] > before[0] and after[1] > before[1], (before, after)

    # Without tasks.keys each Envoy signs with its own key: a poll that reaches the other one
    # is refused, as the log warns.
    assert first.swap_plugin(tasks_plugin(None))
    wait_until(lambda: "tasks.keys is not set" in first.logs() + second.logs(), "the warning")
    answers = []
    for _ in range(4):
        task_id = legacy_task(mcp, EXPORT, {"steps": 20})["taskId"]
        answers.append("error" in legacy(mcp, "tasks/get", {"taskId": task_id}))
    assert all(answers), "round robin: every poll reaches the other Envoy"
    assert first.swap_plugin(tasks_plugin([KEY]))
