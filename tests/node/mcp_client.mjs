// The official TypeScript MCP client against codemode's /mcp (tests/mcp_server/test_node_client.py).
// Usage: node mcp_client.mjs URL [API_KEY]
// Connects over Streamable HTTP, lists tools, resources and resource templates, reads a declaration,
// runs a cell that parks, resumes it with wait, and prints what it saw as one JSON object on stdout.
// The SDK validates every call result's structuredContent against the tool's outputSchema itself.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key] = process.argv.slice(2);
const headers = key ? { Authorization: `Bearer ${key}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "codemode-node-test", version: "1.0.0" });

await client.connect(transport);
const out = { server: client.getServerVersion(), capabilities: client.getServerCapabilities() };
out.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, hasOutputSchema: !!t.outputSchema }));
out.resources = (await client.listResources()).resources.map((r) => r.uri);
out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
const read = await client.readResource({ uri: "codemode://api/results.d.ts" });
out.resultsDts = read.contents[0].text.length;

const parked = await client.callTool({
  name: "exec",
  arguments: { code: 'text("parking"); const r = await yield_control("hold"); return {resumed: r.status};' },
});
out.exec = { isError: parked.isError, envelope: parked.structuredContent, text: parked.content[0].text };
const resumed = await client.callTool({
  name: "wait",
  arguments: { cell_id: parked.structuredContent.cell_id, timeout_ms: 20000 },
});
out.wait = { isError: resumed.isError, envelope: resumed.structuredContent };
const failed = await client.callTool({ name: "exec", arguments: { code: "throw new Error('boom')" } });
out.failed = { isError: failed.isError, code: failed.structuredContent.code };

await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
