// The driver side of `python -m bench peers` for Node peers: read one JSON request a line on stdin, run
// the code it carries through the peer's `run(code)` and answer one JSON line on stdout. The bench
// process times nothing itself but reads this process's CPU from /proc around each request.
//
//   {"op": "runs", "code", "n", "expect"}                 -> {"wall_ms": [n numbers]}
//   {"op": "concurrent", "code", "concurrency", "seconds", "expect"} -> {"runs", "seconds"}
//
// `expect` is what each run's value must summarise to (a number, or an array's length): a peer that
// answers anything else fails the request rather than being timed doing something else.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';

/** Import `name` as installed under `dir` (the bench's cache), and its package.json version. */
export async function loadFrom(dir, name) {
  const require = createRequire(join(dir, 'package.json'));
  const module = await import(pathToFileURL(require.resolve(name)).href);
  const manifest = JSON.parse(readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8'));
  return { module, version: manifest.version };
}

function summary(value) {
  return Array.isArray(value) ? value.length : value;
}

async function checked(run, code, expect) {
  const value = await run(code);
  if (summary(value) !== expect) {
    throw new Error(`expected ${expect}, got ${JSON.stringify(value)?.slice(0, 200)}`);
  }
}

async function handle(run, req) {
  if (req.op === 'runs') {
    const wall = [];
    for (let i = 0; i < req.n; i++) {
      const start = performance.now();
      await checked(run, req.code, req.expect);
      wall.push(performance.now() - start);
    }
    return { wall_ms: wall };
  }
  if (req.op === 'concurrent') {
    const start = performance.now();
    const deadline = start + req.seconds * 1000;
    let runs = 0;
    const lane = async () => {
      while (performance.now() < deadline) {
        await checked(run, req.code, req.expect);
        runs += 1;
      }
    };
    await Promise.all(Array.from({ length: req.concurrency }, lane));
    return { runs, seconds: (performance.now() - start) / 1000 };
  }
  throw new Error(`unknown op ${req.op}`);
}

/** Serve requests until stdin closes; `run(code)` runs one piece of guest code in a fresh guest. */
export async function serve({ versions, run, close }) {
  const write = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
  write({ ready: true, versions: { node: process.version, ...versions } });
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    try {
      write(await handle(run, JSON.parse(line)));
    } catch (error) {
      write({ error: String(error?.message ?? error), stack: String(error?.stack ?? '') });
    }
  }
  await close?.();
}

/** The cache directory the bench installed this peer into (first argument). */
export const peerDir = process.argv[2];
