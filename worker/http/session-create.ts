// Creating a session, for `POST /v1/sessions` and `POST /v1/exec` alike: the tenant's index
// reserves the id and a quota slot (429 beyond), then the session's object places it on a
// runner. A create cut short leaves no index row behind.
import { type Failure, unwrap } from "../../shared/errors.js";
import {
  DEFAULT_ARGS,
  DEFAULT_COLS,
  DEFAULT_COMMAND,
  DEFAULT_ROWS,
  type Session,
  type SessionLimits,
  type SessionNetwork,
  type SessionTimers,
} from "../../shared/session.js";
import { type Env, limits, sessionStub, tenantStub } from "../env.js";
import type { Reserved } from "../rpc.js";

export interface NewSession {
  id?: string;
  command?: string;
  args?: string[];
  cwd?: string;
  env?: Record<string, string>;
  cols?: number;
  rows?: number;
  pty?: boolean;
  network?: SessionNetwork;
  limits?: Partial<SessionLimits>;
  tags?: string[];
  label?: string;
  timers?: Partial<SessionTimers>;
  /** What a `timeoutSec` that passes sends first: SIGHUP by default, SIGKILL for exec. */
  timeoutSignal?: "SIGKILL";
  /** exec: the session object keeps the first this many output bytes for the answer. */
  captureBytes?: number;
  /** Held until its first client connects (Daytona's `lazyStart`). */
  lazy?: boolean;
}

/** Creates the session; throws ApiError (QUOTA_EXCEEDED, CONFLICT, NO_RUNNER, …) when it cannot. */
export async function createSession(env: Env, tenant: string, body: NewSession): Promise<Session> {
  const lim = limits(env);
  const id = body.id ?? crypto.randomUUID();
  const createdAt = new Date().toISOString();
  const tags = body.tags ?? [];
  const tenantIndex = tenantStub(env, tenant);
  // The tenant's own limits (admin API) are applied by its object: the quota, the rate, and the
  // sandbox maxima (a create asking more is 400; one asking nothing gets at most them).
  const reserved = unwrap(
    (await tenantIndex.reserve({
      tenant,
      id,
      createdAt,
      tags,
      maxActive: lim.maxSessionsPerTenant,
      maxPerMinute: lim.maxCreatesPerMinute,
      ...(body.limits ? { asked: body.limits } : {}),
    })) as Reserved | Failure,
  );
  const { diskMiB, logBytes, ...sandboxMax } = reserved.max;
  const limitsMax = Object.keys(sandboxMax).length > 0 ? sandboxMax : undefined;
  // The tenant's own workspace size and log bound go to the runner with the spawn (docs/protocol.md §7).
  const tenantLimits = { ...(diskMiB !== undefined ? { diskMiB } : {}), ...(logBytes !== undefined ? { logBytes } : {}) };
  const stub = sessionStub(env, tenant, id);
  let result: Session | Failure;
  try {
    result = await stub.create({
      tenant,
      id,
      createdAt,
      tags,
      label: body.label ?? null,
      spec: {
        command: body.command ?? DEFAULT_COMMAND,
        args: body.args ?? (body.command ? [] : DEFAULT_ARGS),
        cwd: body.cwd ?? null,
        env: body.env ?? {},
        cols: body.cols ?? DEFAULT_COLS,
        rows: body.rows ?? DEFAULT_ROWS,
        ...(body.pty === false ? { pty: false } : {}),
        ...(body.network ? { network: body.network } : {}),
        ...(body.limits ? { limits: body.limits } : {}),
        ...(limitsMax ? { limitsMax } : {}),
        ...(Object.keys(tenantLimits).length > 0 ? { tenantLimits } : {}),
      },
      timers: {
        timeoutSec: body.timers?.timeoutSec ?? lim.timeoutSec,
        idleTimeoutSec: body.timers?.idleTimeoutSec ?? lim.idleTimeoutSec,
        detachedTimeoutSec: body.timers?.detachedTimeoutSec ?? lim.detachedTimeoutSec,
      },
      timeoutSignal: body.timeoutSignal,
      captureBytes: body.captureBytes,
      ...(body.lazy ? { lazy: true } : {}),
    });
  } catch (error) {
    // The object failed mid-create (a restart, say): unless it holds the session, the index
    // row must not stay behind holding the id and a quota slot.
    if (await missing(stub)) await tenantIndex.forget(id, null);
    throw error;
  }
  if ("failure" in result) await tenantIndex.forget(id, null);
  return unwrap(result);
}

/** Whether the session object holds no session (a failed lookup counts as "don't know": false). */
async function missing(stub: ReturnType<typeof sessionStub>): Promise<boolean> {
  try {
    const found = await stub.get();
    return "failure" in found && found.failure.code === "NOT_FOUND";
  } catch {
    return false;
  }
}
