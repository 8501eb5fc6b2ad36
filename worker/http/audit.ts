// Writing the tenant's audit log from the routes (docs/security.md, "Audit log"): who (the key's
// id, `tok:<jti>` for a session token, `admin`), from where, what, and how it ended. An entry is
// written once the outcome is known, with ctx.waitUntil: the answer does not wait for it (the
// write is one RPC to the tenant's object, which orders entries as they arrive). Nothing of a
// request's content is recorded: counts and names only.
import type { Context } from "hono";
import { ApiError } from "../../shared/errors.js";
import { log } from "../../shared/log.js";
import type { AuditAction, AuditActor } from "../../shared/webhooks.js";
import type { Principal } from "../auth/auth.js";
import { type Env, tenantStub } from "../env.js";
import type { NewAuditEntry } from "../rpc.js";

type Detail = NonNullable<NewAuditEntry["detail"]>;

/** The client's address: `cf-connecting-ip` (set by Cloudflare), else the first `x-forwarded-for` hop. */
export function clientIp(headers: { header(name: string): string | undefined }): string | null {
  const cf = headers.header("cf-connecting-ip")?.trim();
  if (cf) return cf.slice(0, 64);
  const forwarded = headers.header("x-forwarded-for")?.split(",")[0]?.trim();
  return forwarded ? forwarded.slice(0, 64) : null;
}

export function actorOf(principal: Principal | "admin"): AuditActor {
  if (principal === "admin") return { id: "admin", kind: "admin" };
  if (principal.role === "owner") return { id: principal.keyId, kind: "key" };
  return { id: `tok:${principal.tokenId ?? "-"}`, kind: "token", role: principal.role };
}

export interface AuditWhat {
  tenant: string;
  actor: AuditActor;
  action: AuditAction;
  sessionId?: string;
  detail?: Detail;
}

/** What of a route's context an entry needs (any of the apps' contexts has it). */
type AnyContext = Pick<Context<{ Bindings: Env }>, "env" | "req" | "executionCtx">;

/** Appends one entry, without holding up the answer. */
export function audit(c: AnyContext, what: AuditWhat, outcome: string): void {
  const entry: NewAuditEntry = {
    at: new Date().toISOString(),
    actor: what.actor,
    action: what.action,
    ...(what.sessionId !== undefined ? { sessionId: what.sessionId } : {}),
    ip: clientIp(c.req),
    outcome,
    ...(what.detail !== undefined ? { detail: what.detail } : {}),
  };
  const write = Promise.resolve(tenantStub(c.env, what.tenant).audit(entry)).catch((error: unknown) =>
    log.warn("audit.write", { tenant: what.tenant, action: what.action, outcome: "lost", error }),
  );
  c.executionCtx.waitUntil(write);
}

/**
 * Runs `act` and records its outcome: `ok`, or the code it was refused with (then rethrown). The
 * detail may be filled in by `act` (a byte count, a new id) through the object it is given.
 */
export async function audited<T>(c: AnyContext, what: AuditWhat, act: (detail: Detail) => Promise<T>): Promise<T> {
  const detail: Detail = { ...what.detail };
  try {
    const result = await act(detail);
    audit(c, { ...what, ...(Object.keys(detail).length ? { detail } : {}) }, "ok");
    return result;
  } catch (error) {
    const code = error instanceof ApiError ? error.code : "INTERNAL";
    audit(c, { ...what, ...(Object.keys(detail).length ? { detail } : {}) }, code);
    throw error;
  }
}
