// Bindings and variables the Worker receives (wrangler.toml, `wrangler dev --var`, secrets).
// The objects' bindings are typed by their RPC faces (rpc.ts), never by their classes, so that
// nothing here imports an object's module.
import type { PoolRpc, SessionRpc, TenantRpc } from "./rpc.js";

export interface Env {
  PTY_SESSION: DurableObjectNamespace<SessionRpc>;
  RUNNER_POOL: DurableObjectNamespace<PoolRpc>;
  TENANT: DurableObjectNamespace<TenantRpc>;
  API_KEYS?: string;
  RUNNER_TOKEN?: string;
  /** Signs per-runner credentials (docs/security.md); unset = only the shared RUNNER_TOKEN. */
  RUNNER_SECRET?: string;
  TOKEN_SECRET?: string;
  MAX_SESSIONS_PER_TENANT?: string;
  MAX_CLIENTS_PER_SESSION?: string;
  MAX_INPUT_BYTES?: string;
  MAX_CLIENT_LAG_BYTES?: string;
  MAX_CREATES_PER_MINUTE?: string;
  /** How long `POST /v1/sessions` waits for the runner to start the process. */
  START_TIMEOUT_MS?: string;
  /** How long a running session waits for its runner's link to come back before it is `lost`. */
  LINK_GRACE_MS?: string;
  /** A framed client behind and silent (no ack, no frame) this long is cut (default 60 s). */
  CLIENT_STALL_MS?: string;
  /** `GET .../output` reads in flight per session (429 beyond). */
  MAX_OUTPUT_READS?: string;
  /** Defaults of the three session timers, in seconds (0 = off; docs/protocol.md §4, "Timers"). */
  SESSION_TIMEOUT_SEC?: string;
  SESSION_IDLE_TIMEOUT_SEC?: string;
  SESSION_DETACHED_TIMEOUT_SEC?: string;
  /** How long an ended session's record and output stay before they are purged. */
  SESSION_RETAIN_SEC?: string;
  /** Longest quiet time on an SSE stream before a keep-alive comment (default 15 s). */
  SSE_KEEPALIVE_MS?: string;
  /** Origins whose pages may call the REST API from a browser: comma-separated, `*` for any; unset = none. */
  CORS_ORIGINS?: string;
  LOG_LEVEL?: string;
}

export interface Limits {
  maxSessionsPerTenant: number;
  maxClientsPerSession: number;
  maxInputBytes: number;
  maxClientLagBytes: number;
  maxCreatesPerMinute: number;
  startTimeoutMs: number;
  linkGraceMs: number;
  clientStallMs: number;
  maxOutputReads: number;
  /** Timer defaults for new sessions, in seconds (0 = off). */
  timeoutSec: number;
  idleTimeoutSec: number;
  detachedTimeoutSec: number;
  retainSec: number;
  sseKeepAliveMs: number;
}

/** A whole number ≥ 0 (0 turns a timer off). */
function wholeSeconds(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return value !== undefined && value !== "" && Number.isSafeInteger(n) && n >= 0 ? n : fallback;
}

function positiveInt(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return value !== undefined && value !== "" && Number.isSafeInteger(n) && n > 0 ? n : fallback;
}

export function limits(env: Env): Limits {
  return {
    maxSessionsPerTenant: positiveInt(env.MAX_SESSIONS_PER_TENANT, 100),
    maxClientsPerSession: positiveInt(env.MAX_CLIENTS_PER_SESSION, 32),
    maxInputBytes: positiveInt(env.MAX_INPUT_BYTES, 65536),
    maxClientLagBytes: positiveInt(env.MAX_CLIENT_LAG_BYTES, 8 * 1024 * 1024),
    maxCreatesPerMinute: positiveInt(env.MAX_CREATES_PER_MINUTE, 120),
    startTimeoutMs: positiveInt(env.START_TIMEOUT_MS, 10_000),
    linkGraceMs: positiveInt(env.LINK_GRACE_MS, 15_000),
    clientStallMs: positiveInt(env.CLIENT_STALL_MS, 60_000),
    maxOutputReads: positiveInt(env.MAX_OUTPUT_READS, 2),
    timeoutSec: wholeSeconds(env.SESSION_TIMEOUT_SEC, 0),
    idleTimeoutSec: wholeSeconds(env.SESSION_IDLE_TIMEOUT_SEC, 0),
    detachedTimeoutSec: wholeSeconds(env.SESSION_DETACHED_TIMEOUT_SEC, 0),
    retainSec: wholeSeconds(env.SESSION_RETAIN_SEC, 86_400),
    sseKeepAliveMs: positiveInt(env.SSE_KEEPALIVE_MS, 15_000),
  };
}

/** `tenant/sessionId`: the name of a session's Durable Object and the key runners use. */
export function sessionKey(tenant: string, sessionId: string): string {
  return `${tenant}/${sessionId}`;
}

export function sessionStub(env: Env, tenant: string, sessionId: string) {
  return env.PTY_SESSION.get(env.PTY_SESSION.idFromName(sessionKey(tenant, sessionId)));
}

export function tenantStub(env: Env, tenant: string) {
  return env.TENANT.get(env.TENANT.idFromName(tenant));
}

export function poolStub(env: Env) {
  return env.RUNNER_POOL.get(env.RUNNER_POOL.idFromName("global"));
}
