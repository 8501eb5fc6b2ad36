// The local edge: the Worker in workerd with real Durable Objects, as `wrangler dev` runs it, but
// started through wrangler's own API (`unstable_startWorker`, the DevEnv `wrangler dev` itself
// uses: same bundling, same watching of the sources and of web/dist, same storage), because its
// CLI cannot run without an inspector: `wrangler dev` always opens one (a port of its own, or a
// free one), and workerd gets an inspector and a dev-registry debug port of its own besides.
// Here `dev.inspector: false` leaves every one of them closed, and with no dev registry workerd
// opens no debug port: a session must never reach an inspector (docs/security.md).
// `--inspector-port N` opens the inspector on 127.0.0.1:N (`INSPECT=1 npm start`).
//
// What is still listening, all on 127.0.0.1 and none of it an inspector: `--port` (the edge); the
// port workerd serves the Worker itself on (the edge's port forwards to it); and one HTTP server
// per workerd in this Node process (miniflare's "loopback", how workerd calls back into Node:
// logs, errors, wrangler's reload signals). stack.ts starts this file; test/start.test.ts checks
// the list.
//
// Everything this process and workerd create (Durable Object storage under `--persist-to`,
// miniflare's temporary folders) is readable by its owner only: umask 077 before anything starts.
import { join } from "node:path";
import { parseArgs } from "node:util";
import { unstable_startWorker } from "wrangler";
import { ROOT } from "./stack.js";
import { portTaken } from "./start-checks.js";

process.umask(0o077);

const { values } = parseArgs({
  options: {
    ip: { type: "string", default: "127.0.0.1" },
    port: { type: "string" },
    "inspector-port": { type: "string" },
    "env-file": { type: "string" },
    "persist-to": { type: "string" },
    "log-level": { type: "string", default: "warn" },
    var: { type: "string", multiple: true, default: [] },
  },
});
type LogLevel = "none" | "error" | "warn" | "info" | "log" | "debug";
const logLevel = values["log-level"] as LogLevel;
// wrangler's own logger reads its level from here at every line (`wrangler dev --log-level` sets it).
process.env.WRANGLER_LOG = logLevel;
const inspectorPort = values["inspector-port"] === undefined ? undefined : Number(values["inspector-port"]);

// workerd cannot listen on a port that is taken, and wrangler then retries without end instead of
// exiting: said here, the process exits and its starter (stack.ts) hears why.
const port = values.port === undefined ? undefined : Number(values.port);
const taken = port === undefined ? null : await portTaken(port, values.ip);
if (taken) {
  process.stderr.write(`edge: port ${port} on ${values.ip} is in use: ${taken}\n`);
  process.exit(1);
}

const worker = await unstable_startWorker({
  config: join(ROOT, "wrangler.toml"),
  envFiles: values["env-file"] ? [values["env-file"]] : undefined,
  // As `wrangler dev --var K:V`: wins over wrangler.toml's [vars]; values from the env file do not.
  bindings: Object.fromEntries(
    values.var.map((pair) => {
      const at = pair.indexOf(":");
      return [pair.slice(0, at), { type: "plain_text" as const, value: pair.slice(at + 1) }];
    }),
  ),
  sendMetrics: false,
  dev: {
    server: { hostname: values.ip, port },
    inspector: inspectorPort === undefined ? false : { hostname: "127.0.0.1", port: inspectorPort },
    persist: values["persist-to"],
    logLevel,
    enableContainers: false,
  },
});
await worker.ready;

// Stopped as a process group (stack.ts): wrangler removes its temporary folders and stops workerd.
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    void worker.dispose().finally(() => process.exit(0));
  });
}
