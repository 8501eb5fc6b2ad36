// `npm start`: the whole stack on 127.0.0.1:PORT — the edge (wrangler dev → workerd, real
// Durable Objects), one runner, and the output log — and Ctrl+C stops every child.
//
// The children run in process groups of their own (stack.ts), so a terminal's Ctrl+C reaches
// only this process (and npm, tsx, and whatever reads the output: `npm start | tee log`); this
// process stops them. With a pipe, the reader dies of the same Ctrl+C first, and every later
// write to stdout/stderr fails with EPIPE: those errors are ignored here (an unhandled one would
// end this process halfway through stopping, leaving wrangler, workerd and the runner running).
//
// What it opens and keeps (docs/security.md, "Local start"): no inspector unless INSPECT=1 (then on
// a free port, printed); Durable Object storage in STATE_DIR, its owner's only (stack.ts). Its
// runner sandboxes sessions when it can; when it cannot (not root, bubblewrap or slirp4netns
// missing) it runs them unsandboxed, with a loud warning (sandbox-choice.ts).
import { chooseSandbox, sandboxFacts } from "./sandbox-choice.js";
import { edgeVariables, portTaken } from "./start-checks.js";
import { type Edge, freePort, type ManagedProcess, secret, startEdge, startRunner, waitForRunners } from "./stack.js";

/** A reader that went away (EPIPE) must not stop the shutdown: what cannot be printed is dropped. */
for (const stream of [process.stdout, process.stderr]) stream.on("error", () => undefined);
const say = (text: string) => {
  if (process.stdout.writable) process.stdout.write(`${text}\n`);
};

const port = Number(process.env.PORT ?? 8787);
// Said before anything starts: a second `npm start` on a port that is in use would otherwise
// start wrangler only to see it fail, with its own message.
const taken = await portTaken(port);
if (taken) {
  process.stderr.write(`npm start: port ${port} on 127.0.0.1 is in use: ${taken}. Stop it, or pick another port with PORT=…\n`);
  process.exit(1);
}
let apiKeys = process.env.API_KEYS;
if (!apiKeys) {
  apiKeys = "dev:dev-key";
  if (process.stderr.writable) process.stderr.write("warning: API_KEYS is not set; using the local development key dev:dev-key\n");
}
const sandbox = chooseSandbox(sandboxFacts());
if (sandbox.warning && process.stderr.writable) process.stderr.write(`${sandbox.warning}\n`);
const inspectorPort = process.env.INSPECT === "1" ? await freePort() : undefined;
const runnerToken = process.env.RUNNER_TOKEN ?? secret();
const tokenSecret = process.env.TOKEN_SECRET ?? secret();
// Every Worker variable set in this environment reaches the edge (shared/worker-vars.ts lists
// them all); API_KEYS, RUNNER_TOKEN and TOKEN_SECRET are read above (or made up).
const vars = edgeVariables(process.env);
/** The children, once started. */
const stack: { edge?: Edge; runner?: ManagedProcess } = {};
let stopping = false;
async function stop(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  say("\nstopping …");
  // SIGINT (stack.ts): the runner ends its sessions at once instead of draining them.
  await stack.runner?.stop();
  // Stopped while the edge was still starting: it is stopped as soon as it is up (or has failed).
  await (stack.edge ?? (await edgeStarting.catch(() => undefined)))?.stop();
  process.exit(code);
}
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => void stop(0));
// However this process ends (an error, process.exit), no process group of the stack outlives it.
process.on("exit", () => {
  stack.runner?.kill("SIGKILL");
  stack.edge?.kill("SIGKILL");
});

const started = performance.now();
say(`starting the edge on 127.0.0.1:${port} …`);
const edgeStarting = startEdge({
  port,
  apiKeys,
  runnerToken,
  tokenSecret,
  vars,
  // Durable Object storage: sessions and keys survive a restart. STATE_DIR puts it elsewhere.
  persistTo: process.env.STATE_DIR ?? ".wrangler/state",
  inspectorPort,
  echo: true,
});
const edge = await edgeStarting;
stack.edge = edge;
if (stopping) await new Promise(() => undefined); // stop() has it from here
const runner = startRunner({ brokerUrl: edge.url, runnerToken, env: sandbox.env, echo: true });
stack.runner = runner;
void edge.exited.then(() => void stop(1));
void runner.exited.then(() => void stop(1));
await waitForRunners(edge.url, runnerToken, 1);

const key = apiKeys.split(",")[0].split(":").slice(1).join(":");
say(`
ptybroker is up in ${Math.round(performance.now() - started)} ms

  URL        ${edge.url}
  API key    ${key.startsWith("sha256:") ? "(given as a hash in API_KEYS)" : key}
  Sandbox    ${sandbox.sandbox === "none" ? "none: sessions run UNSANDBOXED" : sandbox.sandbox}
  Inspector  ${inspectorPort === undefined ? "closed (INSPECT=1 opens it)" : `ws://127.0.0.1:${inspectorPort}/ws (chrome://inspect: add 127.0.0.1:${inspectorPort})`}

  curl -s -X POST ${edge.url}/v1/sessions -H 'authorization: Bearer ${key}' -H 'content-type: application/json' -d '{}'

Ctrl+C stops everything.
`);
// Again where it is seen last: wrangler's and the runner's lines may have pushed the first one away.
if (sandbox.warning) say(`${sandbox.warning}\n`);
