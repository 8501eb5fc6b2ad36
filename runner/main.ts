// Composition root of the runner: configuration, the control socket, and the hosted sessions.
import { setLogLevel, log } from "../shared/log.js";
import { loadConfig } from "./config.js";
import { ControlLink } from "./control.js";
import { HostedSession } from "./hosted-session.js";

const config = loadConfig();
setLogLevel(config.logLevel);

const sessions = new Map<string, HostedSession>();

const control = new ControlLink(config, {
  hostedSessions: () => [...sessions.keys()],
  onSpawn(message) {
    if (sessions.has(message.key)) return log.warn("runner.spawn", { key: message.key, outcome: "duplicate" });
    if (stopping) return log.warn("runner.spawn", { key: message.key, outcome: "stopping" });
    const session = new HostedSession(config, message, (key) => {
      sessions.delete(key);
      control.send({ type: "released", key });
      if (stopping && sessions.size === 0) finish();
    });
    sessions.set(message.key, session);
    session.start();
  },
});

let stopping = false;
let finish: () => void = () => {};

async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  log.info("runner.stopping", { signal, sessions: sessions.size });
  const drained = new Promise<void>((resolve) => {
    finish = resolve;
    if (sessions.size === 0) resolve();
  });
  for (const session of sessions.values()) session.kill(1000);
  const deadline = new Promise<void>((resolve) => setTimeout(resolve, 3000).unref());
  await Promise.race([drained, deadline]);
  await control.stop();
  process.exit(0);
}

process.on("SIGINT", () => void shutdown("SIGINT"));
process.on("SIGTERM", () => void shutdown("SIGTERM"));

log.info("runner.starting", { runnerId: config.runnerId, broker: config.brokerUrl, capacity: config.capacity });
control.start();
