// The web app of the browser test: the official MCP TypeScript SDK in a page, bundled by
// esbuild. `runMcp(url)` lists the tools and calls one, as a browser-based MCP client would.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

window.runMcp = async (url) => {
  const client = new Client({ name: "switchblade-browser-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const tools = (await client.listTools()).tools.map((tool) => tool.name);
  const called = await client.callTool({ name: "UserService_GetUser", arguments: { user_id: 1 } });
  await client.close();
  return { tools, user: called.structuredContent };
};
