// Runner configuration from the environment (docs/protocol.md §8), validated once at start-up.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { decode } from "hono/jwt";
import { z } from "zod";
import { TENANT_BOUNDS_MAX, TENANT_BOUNDS_MIN } from "../shared/keys.js";
import { parseRedisUrl } from "./log/redis-url.js";

const TOKEN_REQUIRED = "RUNNER_TOKEN (or RUNNER_TOKEN_FILE) is required: the shared token or this runner's credential";

/** An IPv4 or IPv6 prefix, as SESSION_DENY_CIDRS lists them. */
const CIDR = /^(?:\d{1,3}(?:\.\d{1,3}){3}\/\d{1,2}|[0-9A-Fa-f:]+\/\d{1,3})$/;

const Env = z.object({
  BROKER_URL: z.url().default("http://127.0.0.1:8787"),
  RUNNER_TOKEN: z
    .string({ error: TOKEN_REQUIRED })
    .min(1, TOKEN_REQUIRED),
  RUNNER_ID: z.string().min(1).max(128).optional(),
  RUNNER_CAPACITY: z.coerce.number().int().min(0).default(200),
  RUNNER_WORKSPACE: z.string().min(1).default(join(tmpdir(), "ptybroker-workspace")),
  /**
   * Who sessions run as when the runner is root (docs/security.md): `per-tenant`, an unprivileged
   * user per tenant made on first use, or the name of one existing unprivileged user for every
   * session.
   */
  RUNNER_SESSION_USER: z
    .string()
    .regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$/, "per-tenant or a user name")
    .max(64)
    .default("per-tenant"),
  /**
   * 1 (the default): each terminal's screen and shell tracker run in the agent thread
   * (agent/agent-thread.ts), off the thread that reads PTYs; 0: on the main thread
   * (docs/architecture.md, "The emulator off the hot path").
   */
  RUNNER_AGENT_THREAD: z.enum(["0", "1"]).default("1"),
  /**
   * A terminal's screen unused this long (no output, no call) drops its emulator, kept as a
   * checkpoint and made again when next needed; 0: never (docs/architecture.md, "Idle screens").
   */
  RUNNER_SCREEN_IDLE_MS: z.coerce.number().int().min(0).max(86_400_000).default(3_000),
  /**
   * How long a flood's output may wait to be coalesced into one frame (output after a quiet
   * moment goes at once). 16 ms and 256 KiB cut the stack's CPU per MB by about a third
   * against 4 ms and 64 KiB (docs/benchmarks.md).
   */
  COALESCE_MS: z.coerce.number().min(0).max(1000).default(16),
  /** Largest coalesced frame payload. */
  COALESCE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(1 << 20)
    .default(256 * 1024),
  /**
   * The output log; unset = an in-process log (local use: not durable, not shared). One URL, or
   * several Redis Cluster nodes comma-separated (runner/log/redis-url.ts).
   */
  REDIS_URL: z
    .union([
      z.literal("").transform(() => undefined),
      z.string().superRefine((value, ctx) => {
        try {
          parseRedisUrl(value);
        } catch (error) {
          ctx.addIssue({ code: "custom", message: error instanceof Error ? error.message : String(error) });
        }
      }),
    ])
    .optional(),
  /** Output kept per session for replay, at least: the newest this many bytes stay readable. */
  OUTPUT_RETAIN_BYTES: z.coerce
    .number()
    .int()
    .min(64 * 1024)
    .default(8 * 1024 * 1024),
  /**
   * Retained output of all one tenant's sessions together, running and ended, in the output log;
   * past it that tenant's oldest output is trimmed (runner/log/tenant-bound.ts). A tenant's own
   * `logBytes` (admin API, sent with its spawns) replaces it for that tenant.
   */
  TENANT_LOG_BYTES: z.coerce
    .number()
    .int()
    .min(TENANT_BOUNDS_MIN.logBytes)
    .max(TENANT_BOUNDS_MAX.logBytes)
    .default(1024 * 1024 * 1024),
  /**
   * On SIGTERM, how long live sessions may go on before the runner ends them (reason drain)
   * and exits; 0 = end them at once (docs/protocol.md §4, "Timers"; runner/drain.ts).
   */
  RUNNER_DRAIN_SEC: z.coerce.number().int().min(0).default(300),
  /** How long a session's log is kept after the session ends. */
  OUTPUT_TTL_SEC: z.coerce.number().int().min(1).default(24 * 3600),
  /** Unacknowledged output at which the PTY is paused, and the level at which it resumes. */
  FLOW_HIGH_WATER: z.coerce
    .number()
    .int()
    .min(64 * 1024)
    .default(1024 * 1024),
  FLOW_LOW_WATER: z.coerce
    .number()
    .int()
    .min(0)
    .default(256 * 1024),
  /**
   * Each session in a sandbox of its own (docs/security.md, "The sandbox"): `bwrap`, or `none`
   * (local development only: sessions then share the runner's machine, said loudly at start).
   */
  RUNNER_SANDBOX: z.enum(["bwrap", "none"]).default("bwrap"),
  /** A sandboxed session's network when its create names none: `egress` or `none`. */
  SESSION_NETWORK: z.enum(["egress", "none"]).default("egress"),
  /** Destinations an `egress` session never reaches, comma-separated CIDRs (IPv4 and IPv6). */
  SESSION_DENY_CIDRS: z
    .string()
    .default("10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,169.254.0.0/16,100.64.0.0/10,fc00::/7,fe80::/10")
    .superRefine((value, ctx) => {
      for (const cidr of splitList(value)) {
        if (!CIDR.test(cidr)) ctx.addIssue({ code: "custom", message: `${cidr} is not a CIDR (a.b.c.d/n or an IPv6 prefix/n)` });
      }
    }),
  /** Default limits of a session (a create may ask for others, up to the tenant's maximum). */
  SESSION_MEMORY_MIB: z.coerce.number().int().min(32).default(1024),
  SESSION_PIDS: z.coerce.number().int().min(8).default(512),
  SESSION_CPUS: z.coerce.number().min(0.05).default(1),
  /** Size of a tenant's workspace filesystem (ENOSPC beyond), for a tenant without its own `diskMiB`. */
  TENANT_DISK_MIB: z.coerce.number().int().min(TENANT_BOUNDS_MIN.diskMiB).max(TENANT_BOUNDS_MAX.diskMiB).default(2048),
  /** Size of a session's private /tmp and of its /dev/shm. */
  SESSION_TMP_MIB: z.coerce.number().int().min(1).default(256),
  /** Pseudo-terminals a sandboxed session may hold at once (its devpts' `max`); its own terminal is the runner's, not counted. */
  SESSION_PTYS: z.coerce.number().int().min(1).max(4096).default(64),
  /** Comma-separated tenants whose sessions this runner takes; unset = any tenant. */
  RUNNER_TENANTS: z.string().optional(),
  LOG_LEVEL: z.enum(["debug", "info", "warn", "error"]).default("info"),
});

export interface RunnerConfig {
  brokerUrl: string;
  runnerToken: string;
  runnerId: string;
  capacity: number;
  workspace: string;
  /** RUNNER_SESSION_USER: "per-tenant" or a user name */
  sessionUser: string;
  coalesceMs: number;
  coalesceBytes: number;
  /** RUNNER_AGENT_THREAD */
  agentThread: boolean;
  /** RUNNER_SCREEN_IDLE_MS (0: never) */
  screenIdleMs: number;
  logLevel: string;
  redisUrl: string | undefined;
  /** null = any tenant */
  tenants: string[] | null;
  retainBytes: number;
  /** TENANT_LOG_BYTES */
  tenantLogBytes: number;
  outputTtlSec: number;
  flowHighWater: number;
  flowLowWater: number;
  /** RUNNER_DRAIN_SEC */
  drainSec: number;
  sandbox: SandboxConfig;
}

/** How sessions are sandboxed (docs/security.md, "The sandbox"). */
export interface SandboxConfig {
  /** RUNNER_SANDBOX */
  kind: "bwrap" | "none";
  /** SESSION_NETWORK */
  network: "egress" | "none";
  /** SESSION_DENY_CIDRS */
  denyCidrs: string[];
  /** SESSION_MEMORY_MIB, SESSION_PIDS, SESSION_CPUS */
  limits: { memoryMiB: number; pids: number; cpus: number };
  /** TENANT_DISK_MIB */
  diskMiB: number;
  /** SESSION_TMP_MIB */
  tmpMiB: number;
  /** SESSION_PTYS */
  ptys: number;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): RunnerConfig {
  const parsed = Env.safeParse(withTokenFile(env));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid runner configuration:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  return {
    brokerUrl: e.BROKER_URL.replace(/\/+$/, ""),
    runnerToken: e.RUNNER_TOKEN,
    runnerId: e.RUNNER_ID ?? credentialRunnerId(e.RUNNER_TOKEN) ?? `${hostname()}-${process.pid}-${randomBytes(3).toString("hex")}`,
    capacity: e.RUNNER_CAPACITY,
    workspace: e.RUNNER_WORKSPACE,
    sessionUser: e.RUNNER_SESSION_USER,
    coalesceMs: e.COALESCE_MS,
    coalesceBytes: e.COALESCE_BYTES,
    agentThread: e.RUNNER_AGENT_THREAD === "1",
    screenIdleMs: e.RUNNER_SCREEN_IDLE_MS,
    logLevel: e.LOG_LEVEL,
    redisUrl: e.REDIS_URL,
    tenants: e.RUNNER_TENANTS?.trim()
      ? e.RUNNER_TENANTS.split(",")
          .map((t) => t.trim())
          .filter(Boolean)
      : null,
    retainBytes: e.OUTPUT_RETAIN_BYTES,
    tenantLogBytes: e.TENANT_LOG_BYTES,
    outputTtlSec: e.OUTPUT_TTL_SEC,
    flowHighWater: e.FLOW_HIGH_WATER,
    flowLowWater: Math.min(e.FLOW_LOW_WATER, Math.floor(e.FLOW_HIGH_WATER / 2)),
    drainSec: e.RUNNER_DRAIN_SEC,
    sandbox: {
      kind: e.RUNNER_SANDBOX,
      network: e.SESSION_NETWORK,
      denyCidrs: splitList(e.SESSION_DENY_CIDRS),
      limits: { memoryMiB: e.SESSION_MEMORY_MIB, pids: e.SESSION_PIDS, cpus: e.SESSION_CPUS },
      diskMiB: e.TENANT_DISK_MIB,
      tmpMiB: e.SESSION_TMP_MIB,
      ptys: e.SESSION_PTYS,
    },
  };
}

function splitList(value: string): string[] {
  return value
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);
}

/** The runner id a per-runner credential names (the edge goes by it, not by RUNNER_ID), if it is one. */
function credentialRunnerId(token: string): string | undefined {
  try {
    const { payload } = decode(token);
    return payload.aud === "ptybroker-runner" && typeof payload.rid === "string" ? payload.rid : undefined;
  } catch {
    return undefined; // the shared RUNNER_TOKEN, not a JWT
  }
}

/**
 * RUNNER_TOKEN_FILE: the token is read from a file (mode 0600, say), so it is not in the
 * runner's environment, which any process of the runner's own user can read in /proc.
 */
function withTokenFile(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const file = env.RUNNER_TOKEN_FILE;
  if (!file) return env;
  if (env.RUNNER_TOKEN) throw new Error("invalid runner configuration: set RUNNER_TOKEN or RUNNER_TOKEN_FILE, not both");
  let token: string;
  try {
    token = readFileSync(file, "utf8").trim();
  } catch (error) {
    throw new Error(`invalid runner configuration: RUNNER_TOKEN_FILE ${file}: ${(error as Error).message}`);
  }
  return { ...env, RUNNER_TOKEN: token };
}
