// isolated-vm (V8 isolates in this process) through its public API: each run a new Isolate (64 MiB) and
// context, `nop` an async host function reached through an ivm.Reference whose promise the guest
// awaits, the code an async function body whose value is copied out; the isolate is disposed after.
import { loadFrom, peerDir, serve } from './harness.mjs';

const { module: imported, version } = await loadFrom(peerDir, 'isolated-vm');
const ivm = imported.default ?? imported;
const nop = new ivm.Reference(async () => 1);
const GLUE =
  'globalThis.nop = (a) => __nop.apply(undefined, [a], {arguments: {copy: true}, result: {promise: true, copy: true}});';

await serve({
  versions: { 'isolated-vm': version },
  run: async (code) => {
    const isolate = new ivm.Isolate({ memoryLimit: 64 });
    try {
      const context = await isolate.createContext();
      await context.global.set('__nop', nop);
      await context.eval(GLUE);
      return await context.eval(`(async () => {\n${code}\n})()`, { promise: true, copy: true, timeout: 60_000 });
    } finally {
      isolate.dispose();
    }
  },
});
