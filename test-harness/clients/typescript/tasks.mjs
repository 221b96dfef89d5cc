// Runs Switchblade's task tools with the official MCP TypeScript SDK's tasks (2025-11-25,
// experimental in the SDK), and prints what it saw as one JSON object for the integration test
// to check. Usage: node tasks.mjs MCP_URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.argv[2]);
const client = new Client({ name: "switchblade-tasks", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(url);
await client.connect(transport);

// The list tells the SDK which tools run as tasks (execution.taskSupport).
await client.listTools();

// callToolStream makes the task, polls tasks/get at pollInterval, then reads tasks/result, and
// checks the result's structuredContent against the tool's outputSchema.
async function stream(name, args) {
  const messages = [];
  for await (const message of client.experimental.tasks.callToolStream({ name, arguments: args })) {
    messages.push(
      message.type === "error"
        ? { type: "error", code: message.error.code, message: message.error.message }
        : message,
    );
  }
  return messages;
}
const exported = await stream("ExportService_ExportCatalog", { query: "stove", steps: 2 });
const repriced = await stream("ExportService_RepriceCatalog", { currency_code: "USD", steps: 1 });

// A task cancelled: made, cancelled, then read.
const created = await client.request(
  { method: "tools/call", params: { name: "ExportService_RebuildIndex", arguments: {}, task: {} } },
  CreateTaskResultSchema,
);
const taskId = created.task.taskId;
const cancelled = await client.experimental.tasks.cancelTask(taskId);
const afterCancel = await client.experimental.tasks.getTask(taskId);

console.log(JSON.stringify({
  protocolVersion: transport.protocolVersion,
  capabilities: client.getServerCapabilities(),
  exported,
  repriced,
  created,
  cancelled,
  afterCancel,
}));
await client.close();
