// The official TypeScript MCP client (2025-11-25, a session at /mcp) as a person's client: it declares form
// elicitation and answers codemode's approval forms (tests/mcp_server/test_node_client.py).
// Usage: node mcp_approval_client.mjs URL API_KEY
// Runs a cell that asks for two quotes: the person approves the first and denies the second with a reason.
// Prints what the forms showed and the cell's envelope as one JSON object on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, key] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "codemode-node-person", version: "1.0.0" }, { capabilities: { elicitation: {} } });
const shown = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  shown.push({ message: request.params.message, schema: request.params.requestedSchema });
  if (request.params.message.includes('"destination":"IT"')) {
    return { action: "accept", content: { approve: false, reason: "not to Italy today" } };
  }
  return { action: "accept", content: { approve: true } };
});

await client.connect(transport);
const code = `
const fr = await quote_shipping({origin: "DE", destination: "FR", weight_kg: 2});
try { await quote_shipping({origin: "DE", destination: "IT", weight_kg: 2}); return [fr.carrier, "ran"]; }
catch (e) { return [fr.carrier, e.code, e.message]; }`;
const result = await client.callTool({ name: "exec", arguments: { code } });
const out = { protocol: transport.protocolVersion, session: !!transport.sessionId, shown, envelope: result.structuredContent };
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
