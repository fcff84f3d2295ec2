// Vercel `run` (the QuickJS-in-worker-threads runtime under @ai-sdk/code-mode) through its public API:
// one runner, each run a fresh QuickJS context in its pooled worker threads; `tools.nop` an async host
// function. Limits raised only where the workloads need it (1,000 host calls in flight, a ~1 MiB result),
// as codemode's are for the same run; the process-wide worker cap set to the bench's concurrency so 16
// runs at once are admitted rather than refused.
import { loadFrom, peerDir, serve } from './harness.mjs';

const { module: run, version } = await loadFrom(peerDir, 'run');
const MiB = 1024 * 1024;
run.setMaxWorkers(16);
const runner = run.createRunner({
  limits: {
    maxBridgeRequests: 100_000,
    maxInFlightBridgeRequests: 10_000,
    maxResultBytes: 16 * MiB,
    timeoutMs: 60_000,
  },
});
const hostFunctions = { tools: { nop: async () => 1 } };

await serve({
  versions: { run: version },
  run: async (source) => {
    const result = await runner.run({ source, hostFunctions });
    if (result.status !== 'completed') throw new Error(`run ended ${result.status}`);
    return result.value;
  },
});
