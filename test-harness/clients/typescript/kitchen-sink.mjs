// Calls the kitchen-sink tools with the official MCP TypeScript SDK: its callTool validates
// structuredContent against the outputSchema (Ajv), here with $defs and $ref for recursion.
// Prints what came back as one JSON object. Usage: node kitchen-sink.mjs MCP_URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const client = new Client({ name: "switchblade-kitchen-sink", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(process.argv[2])));

let tree = { label: "leaf", children: [] };
for (let depth = 0; depth < 8; depth++) {
  tree = { label: `level ${depth}`, children: [tree], forest: { trees: [{ label: "side", children: [] }] } };
}
const echoedTree = await client.callTool({ name: "KitchenSinkService_EchoTree", arguments: tree });
const everything = {
  must: "present",
  color: "COLOR_GREEN",
  scalars: { an_int64: "-9007199254740993", a_double: 1.5, some_bytes: "AAEC/w==" },
  by_id: { "-5": "negative" },
  at: "2026-01-31T12:00:00Z",
  tree,
  a_value: [1, "two", null],
  anything: { "@type": "type.googleapis.com/test.kitchensink.v1.Tree", label: "packed", children: [] },
};
const echoed = await client.callTool({ name: "KitchenSinkService_Echo", arguments: everything });
const time = await client.callTool({ name: "KitchenSinkService_EchoTime", arguments: { at: "2026-01-31T12:00:00Z" } });

console.log(JSON.stringify({ tree, echoedTree, echoed, time }));
await client.close();
