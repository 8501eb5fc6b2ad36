// `GET /v1/audit` (docs/protocol.md, "Audit log"): the tenant's audit log, oldest first, paged
// with `after` (a `nextCursor`) and `limit`, for a key that carries every scope (like /v1/keys):
// the log names every key and client address of the tenant.
import { Hono } from "hono";
import type { AuditPage } from "../../shared/webhooks.js";
import { type AuthVariables, authenticate, requireEveryScope } from "../auth/auth.js";
import { type Env, tenantStub } from "../env.js";
import { AuditQuery } from "./webhook-schemas.js";
import { validate } from "./validate.js";

export const auditRoutes = new Hono<{ Bindings: Env; Variables: AuthVariables }>();

auditRoutes.use("*", authenticate);

auditRoutes.get("/", validate("query", AuditQuery), async (c) => {
  const tenant = requireEveryScope(c.get("principal"));
  const { after, limit } = c.req.valid("query");
  return c.json((await tenantStub(c.env, tenant).auditPage(after ?? 0, limit)) as AuditPage);
});
