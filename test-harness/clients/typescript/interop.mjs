// Lists and calls Switchblade's tools with the official MCP TypeScript SDK, and prints what it
// saw as one JSON object for the integration test to check. Usage: node interop.mjs MCP_URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = new URL(process.argv[2]);
const client = new Client({ name: "switchblade-interop", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(url);
await client.connect(transport);

const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  tools.push(...page.tools);
  cursor = page.nextCursor;
} while (cursor);

// callTool validates structuredContent against the tool's outputSchema (Ajv) and throws if it
// does not conform, so a success here also checks the schema.
const item = await client.callTool({ name: "CatalogService_GetItem", arguments: { id: "2" } });
const search = await client.callTool({ name: "CatalogService_Search", arguments: { query: "book" } });
const injection = await client.callTool({ name: "UserService_GetUser", arguments: { user_id: { $ne: null } } });
const missing = await client.callTool({ name: "UserService_GetUser", arguments: { user_id: 404 } });
await client.ping();

console.log(JSON.stringify({
  protocolVersion: transport.protocolVersion,
  server: client.getServerVersion(),
  tools: tools.map((tool) => tool.name),
  item,
  search,
  injection,
  missing,
}));
await client.close();
