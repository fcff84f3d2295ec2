// @ai-sdk/code-mode through `experimental_runCodeMode`, its direct-execution API: an AI SDK `tool` named
// `nop` (an open JSON schema, an async execute answering 1) called by the guest as `tools.nop`. Limits
// raised only where the workloads need it, as for `run` (which it runs on).
import { loadFrom, peerDir, serve } from './harness.mjs';

const { module: codeMode, version } = await loadFrom(peerDir, '@ai-sdk/code-mode');
const { module: ai, version: aiVersion } = await loadFrom(peerDir, 'ai');
const { module: run } = await loadFrom(peerDir, 'run');
const MiB = 1024 * 1024;
run.setMaxWorkers(16);
const tools = {
  nop: ai.tool({
    description: 'Answers 1.',
    inputSchema: ai.jsonSchema({ type: 'object', additionalProperties: true }),
    execute: async () => 1,
  }),
};
const options = {
  executionPolicy: {
    maxBridgeRequests: 100_000,
    maxInFlightBridgeRequests: 10_000,
    maxResultBytes: 16 * MiB,
    timeoutMs: 60_000,
  },
};

await serve({
  versions: { '@ai-sdk/code-mode': version, ai: aiVersion },
  run: (js) => codeMode.experimental_runCodeMode({ js, tools, options }),
});
