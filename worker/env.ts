// Bindings and variables the Worker receives (wrangler.toml, `wrangler dev --var`, secrets); the
// variables and what each means are listed once, in shared/worker-vars.ts.
// The objects' bindings are typed by their RPC faces (rpc.ts), never by their classes, so that
// nothing here imports an object's module.
import type { WorkerVariable } from "../shared/worker-vars.js";
import type { PoolRpc, RegistryRpc, SessionRpc, TenantRpc } from "./rpc.js";

/** The variables, one optional string each, from the one list in shared/worker-vars.ts. */
export type WorkerVars = { readonly [K in WorkerVariable]?: string };

export interface Env extends WorkerVars {
  PTY_SESSION: DurableObjectNamespace<SessionRpc>;
  RUNNER_POOL: DurableObjectNamespace<PoolRpc>;
  TENANT: DurableObjectNamespace<TenantRpc>;
  TENANT_REGISTRY: DurableObjectNamespace<RegistryRpc>;
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

/** The admin API's list of tenants (tenant/registry.ts); never on a tenant's own requests. */
export function registryStub(env: Env) {
  return env.TENANT_REGISTRY.get(env.TENANT_REGISTRY.idFromName("global"));
}

export function poolStub(env: Env) {
  return env.RUNNER_POOL.get(env.RUNNER_POOL.idFromName("global"));
}
