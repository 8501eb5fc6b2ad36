// Composition root of the runner: configuration, the output log, the control socket, the
// hosted sessions and the reader links.
import { setLogLevel, log } from "../shared/log.js";
import { loadConfig } from "./config.js";
import { ControlLink } from "./control.js";
import { HostedSession } from "./hosted-session.js";
import { type Isolation, startIsolation } from "./isolation.js";
import { MemoryLog } from "./memory-log.js";
import type { OutputLog } from "./output-log.js";
import { ReaderLink } from "./reader-link.js";
import { RedisLog } from "./redis-log.js";

const config = loadConfig();
setLogLevel(config.logLevel);

/** A running session's log lives this long without appends (a runner that died leaves none forever). */
const IDLE_TTL_SEC = 7 * 24 * 3600;
const logOptions = { retainBytes: config.retainBytes, idleTtlSec: IDLE_TTL_SEC };
const redisLog = config.redisUrl ? new RedisLog(config.redisUrl, logOptions) : undefined;
const memoryLog = redisLog ? undefined : new MemoryLog(logOptions);
const outputLog: OutputLog = redisLog ?? (memoryLog as MemoryLog);

const sessions = new Map<string, HostedSession>();
const readers = new Map<string, ReaderLink>();
// The edge keeps recently read output for replays: tell it when the log may have lost some.
outputLog.onMaybeLost?.(() => {
  for (const session of sessions.values()) session.logMaybeLost();
  for (const reader of readers.values()) reader.logMaybeLost();
});

const control = new ControlLink(config, {
  hostedSessions: () => [...sessions.keys()],
  onMessage(message) {
    switch (message.type) {
      case "spawn": {
        if (sessions.has(message.key)) return log.warn("runner.spawn", { key: message.key, outcome: "duplicate" });
        if (stopping) return log.warn("runner.spawn", { key: message.key, outcome: "stopping" });
        const session = new HostedSession(config, message, outputLog, (key) => {
          sessions.delete(key);
          control.send({ type: "released", key });
          if (stopping && sessions.size === 0) finish();
        });
        sessions.set(message.key, session);
        session.start();
        return;
      }
      case "serve": {
        if (readers.has(message.key) || stopping) return;
        const reader = new ReaderLink(config, message.key, message.tenant, message.sessionId, message.linkToken, outputLog, (key) =>
          readers.delete(key),
        );
        readers.set(message.key, reader);
        reader.start();
        return;
      }
      case "purge":
        return void outputLog
          .remove(message.key)
          .catch((error: unknown) => log.warn("log.purge", { key: message.key, error }));
    }
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
  for (const reader of readers.values()) reader.close();
  const deadline = new Promise<void>((resolve) => setTimeout(resolve, 3000).unref());
  await Promise.race([drained, deadline]);
  await control.stop();
  // Ends whatever sessions are left (the drain may have timed out) and removes this run's record.
  await sandbox?.close().catch((error: unknown) => log.warn("runner.containment", { outcome: "close_failed", error }));
  await outputLog.close();
  process.exit(0);
}

process.on("SIGINT", () => void shutdown("SIGINT"));
// Where the runner's memory is, on demand (`kill -USR2 <pid>`): heap, Buffers outside it, RSS.
process.on("SIGUSR2", () =>
  log.info("runner.memory", { ...process.memoryUsage(), sessions: sessions.size, readers: readers.size, memoryLog: memoryLog?.held() }),
);
process.on("SIGTERM", () => void shutdown("SIGTERM"));

log.info("runner.starting", {
  runnerId: config.runnerId,
  broker: config.brokerUrl,
  capacity: config.capacity,
  outputLog: config.redisUrl ? "redis" : "memory",
});
// Who sessions run as and what holds their processes; ends what a crashed earlier run left.
// A setting that cannot be honoured (RUNNER_SESSION_USER=root, say) stops the runner here.
let sandbox: Isolation | undefined;
try {
  sandbox = await startIsolation(config);
} catch (error) {
  log.error("runner.isolation", { outcome: "refused", error });
  process.exit(1);
}
// Take sessions only once the log can store their output; a Redis that never answers is logged
// and the runner serves anyway (appends then fail and their ranges replay as gaps).
await redisLog?.ready().catch((error: unknown) => log.error("redis.unready", { error }));
control.start();
