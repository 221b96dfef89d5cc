// Lists Switchblade's tools and calls two of them with the official MCP TypeScript SDK, sending a
// bearer token, and prints what it saw as one JSON object (a refused call as its error).
// Usage: node authorized.mjs MCP_URL TOKEN TOOL...
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, ...toCall] = process.argv.slice(2);
const client = new Client({ name: "switchblade-authorized", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { authorization: `Bearer ${token}` } },
});
await client.connect(transport);

const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  tools.push(...page.tools);
  cursor = page.nextCursor;
} while (cursor);

const arguments_ = {
  CatalogService_GetItem: { id: "2" },
  CatalogService_Search: { query: "book" },
  UserService_GetUser: { user_id: 1 },
};
const calls = {};
for (const name of toCall) {
  try {
    calls[name] = { result: await client.callTool({ name, arguments: arguments_[name] ?? {} }) };
  } catch (error) {
    calls[name] = { error: { code: error.code, message: error.message } };
  }
}

console.log(JSON.stringify({
  protocolVersion: transport.protocolVersion,
  tools: tools.map((tool) => tool.name),
  calls,
}));
await client.close();
