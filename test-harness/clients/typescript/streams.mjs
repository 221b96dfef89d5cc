// Calls Switchblade's streaming tools with the official MCP TypeScript SDK: a server stream with
// a progress handler, a client stream and a bidirectional one. Prints what it saw as one JSON
// object for the integration test to check. Usage: node streams.mjs MCP_URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const client = new Client({ name: "switchblade-streams", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));

// callTool checks structuredContent against each tool's outputSchema (Ajv) and throws if it
// does not conform: the wrapped stream results are checked too.
const progress = [];
const watch = await client.callTool(
  { name: "CatalogService_WatchItems", arguments: { ids: ["5"], interval_ms: 10 } },
  undefined,
  { onprogress: (update) => progress.push(update.progress) },
);
const imported = await client.callTool({
  name: "CatalogService_ImportItems",
  arguments: { messages: [{ name: "Tent", price_minor: 9900, stock: 1 }] },
});
const chat = await client.callTool({ name: "UserService_Chat", arguments: { messages: [{ text: "ahoy" }] } });

console.log(JSON.stringify({ watch, progress, imported, chat }));
await client.close();
