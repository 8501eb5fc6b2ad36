// Composition root of the runner: configuration, the output log, the control socket, the
// hosted sessions, the reader links, and the drain that SIGTERM starts (drain.ts).
import { setLogLevel, log } from "../shared/log.js";
import { closeAgentThread } from "./agent/agent-thread.js";
import { loadConfig } from "./config.js";
import { Drain } from "./drain.js";
import { HostedSession } from "./hosted-session.js";
import { type Isolation, startIsolation } from "./isolation/isolation.js";
import { ControlLink } from "./link/control.js";
import { ReaderLink } from "./link/reader-link.js";
import { TrimReports } from "./link/trim-reports.js";
import { MemoryLog } from "./log/memory-log.js";
import type { OutputLog } from "./log/output-log.js";
import { RedisLog } from "./log/redis-log.js";

const config = loadConfig();
setLogLevel(config.logLevel);

/** A running session's log lives this long without appends (a runner that died leaves none forever). */
const IDLE_TTL_SEC = 7 * 24 * 3600;
const logOptions = { retainBytes: config.retainBytes, idleTtlSec: IDLE_TTL_SEC, tenantBytes: config.tenantLogBytes };
const redisLog = config.redisUrl ? new RedisLog(config.redisUrl, logOptions) : undefined;
const memoryLog = redisLog ? undefined : new MemoryLog(logOptions);
const outputLog: OutputLog = redisLog ?? (memoryLog as MemoryLog);

const sessions = new Map<string, HostedSession>();
/** Hosted sessions not over yet (their exit has not reached the edge): what a drain waits for. */
const hosted = new Set<HostedSession>();
const readers = new Map<string, ReaderLink>();
// The edge keeps recently read output for replays: tell it when the log may have lost some.
outputLog.onMaybeLost?.(() => {
  for (const session of sessions.values()) session.logMaybeLost();
  for (const reader of readers.values()) reader.logMaybeLost();
});
// The tenant bound trimmed a session's log: its host says where the log starts now on its link;
// for a session hosted elsewhere, or over, this runner tells the edge (docs/protocol.md §7a).
const trimReports = new TrimReports(config);
outputLog.onTrimmed((key, from) => {
  const session = sessions.get(key);
  if (session) session.logTrimmed(from);
  else trimReports.report(key, from);
});

const control = new ControlLink(config, {
  hostedSessions: () => [...sessions.keys()],
  // A drain goes on across control reconnects: every register says so.
  draining: () => drain.draining,
  onMessage(message) {
    switch (message.type) {
      case "spawn": {
        if (sessions.has(message.key)) return log.warn("runner.spawn", { key: message.key, outcome: "duplicate" });
        if (drain.draining) {
          // Placed before the pool heard `draining`: not started here; the slot is given back.
          log.warn("runner.spawn", { key: message.key, outcome: "draining" });
          return control.send({ type: "released", key: message.key });
        }
        // The tenant's own log bound, as the edge has it now (absent: TENANT_LOG_BYTES again).
        outputLog.boundTenant(message.tenant, message.spec.tenantLimits?.logBytes);
        const session = new HostedSession(config, message, outputLog, (key) => {
          sessions.delete(key);
          control.send({ type: "released", key });
        });
        sessions.set(message.key, session);
        hosted.add(session);
        void session.over.then(() => {
          hosted.delete(session);
          drain.sessionOver();
        });
        session.start();
        return;
      }
      case "serve": {
        // Reader links keep working while draining: replays of any session go on.
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

/** The last step of a drain: nothing is hosted any more (or the wait for that ran out). */
async function stop(): Promise<void> {
  stopping = true;
  for (const reader of readers.values()) reader.close();
  trimReports.close();
  await control.stop();
  // Ends whatever sessions are left (an undelivered drain) and removes this run's record.
  await sandbox?.close().catch((error: unknown) => log.warn("runner.containment", { outcome: "close_failed", error }));
  await outputLog.close();
  await closeAgentThread();
  log.info("runner.stopped", {});
  process.exit(0);
}

const drain = new Drain(
  {
    sessions: () => [...hosted],
    announce: () => control.send({ type: "draining" }),
    stop,
  },
  { drainSec: config.drainSec },
);

process.on("SIGINT", () => drain.signal("SIGINT"));
// Where the runner's memory is, on demand (`kill -USR2 <pid>`): heap, Buffers outside it, RSS.
process.on("SIGUSR2", () =>
  log.info("runner.memory", { ...process.memoryUsage(), sessions: sessions.size, readers: readers.size, memoryLog: memoryLog?.held() }),
);
process.on("SIGTERM", () => drain.signal("SIGTERM"));

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
if (!stopping) control.start();
