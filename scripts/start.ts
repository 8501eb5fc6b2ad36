// `npm start`: the whole stack on 127.0.0.1:PORT — the edge (wrangler dev → workerd, real
// Durable Objects), one runner, and the output log — and Ctrl+C stops every child.
import { secret, startEdge, startRunner, waitForRunners } from "./stack.js";

const port = Number(process.env.PORT ?? 8787);
let apiKeys = process.env.API_KEYS;
if (!apiKeys) {
  apiKeys = "dev:dev-key";
  console.warn("warning: API_KEYS is not set; using the local development key dev:dev-key");
}
const runnerToken = process.env.RUNNER_TOKEN ?? secret();
const tokenSecret = process.env.TOKEN_SECRET ?? secret();
const passThrough = [
  "MAX_SESSIONS_PER_TENANT",
  "MAX_CLIENTS_PER_SESSION",
  "MAX_INPUT_BYTES",
  "MAX_CLIENT_LAG_BYTES",
  "MAX_CREATES_PER_MINUTE",
  "LINK_GRACE_MS",
  "LOG_LEVEL",
];
const vars = Object.fromEntries(passThrough.filter((k) => process.env[k]).map((k) => [k, process.env[k] as string]));

const started = performance.now();
console.log(`starting the edge on 127.0.0.1:${port} …`);
const edge = await startEdge({
  port,
  apiKeys,
  runnerToken,
  tokenSecret,
  vars,
  persistTo: ".wrangler/state",
  echo: true,
});
const runner = startRunner({ brokerUrl: edge.url, runnerToken, echo: true });

let stopping = false;
async function stop(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  console.log("\nstopping …");
  // SIGINT (stack.ts): the runner ends its sessions at once instead of draining them.
  await runner.stop();
  await edge.stop();
  process.exit(code);
}
process.on("SIGINT", () => void stop(0));
process.on("SIGTERM", () => void stop(0));
void edge.exited.then(() => void stop(1));
void runner.exited.then(() => void stop(1));
await waitForRunners(edge.url, runnerToken, 1);

const key = apiKeys.split(",")[0].split(":").slice(1).join(":");
console.log(`
ptybroker is up in ${Math.round(performance.now() - started)} ms

  URL      ${edge.url}
  API key  ${key.startsWith("sha256:") ? "(given as a hash in API_KEYS)" : key}

  curl -s -X POST ${edge.url}/v1/sessions -H 'authorization: Bearer ${key}' -H 'content-type: application/json' -d '{}'

Ctrl+C stops everything.
`);
