// codemode through its HTTP API, as a caller would reach it: POST /v1/exec on the served service
// (uvicorn on a loopback socket, workers under the kernel sandbox), keep-alive connections, the value
// read from the answer. Arguments: the service's base URL and the cell language.
import http from 'node:http';
import { serve } from './harness.mjs';

const [base, language] = process.argv.slice(2);
const url = new URL('/v1/exec', base);
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function post(body) {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify(body));
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': data.length } },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

await serve({
  versions: {},
  run: async (code) => {
    const answer = await post({ code, language, timeout_ms: 60_000, max_output_bytes: 8 * 1024 * 1024 });
    const body = JSON.parse(answer.text);
    if (answer.status !== 200 || body.status !== 'completed') {
      throw new Error(`HTTP ${answer.status}: ${answer.text.slice(0, 300)}`);
    }
    return body.value;
  },
  close: () => agent.destroy(),
});
