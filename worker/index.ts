// Composition root of the edge Worker: the Hono app, its routes, and the Durable Objects.
import { Hono } from "hono";
import { ApiError } from "../shared/errors.js";
import { setLogLevel } from "../shared/log.js";
import { type RunnerVariables, TENANT_PATTERN, requireRunner, runnerHeaders } from "./auth/auth.js";
import { type Env, poolStub, sessionStub } from "./env.js";
import { apiCors } from "./http/cors.js";
import { renderError } from "./http/errors.js";
import { routeNotFound } from "./http/not-found.js";
import { LogTrimmedBody, SESSION_ID } from "./http/schemas.js";
import { validate } from "./http/validate.js";
import { adminRoutes } from "./http/admin-routes.js";
import { auditRoutes } from "./http/audit-routes.js";
import { eventRoutes } from "./http/events-routes.js";
import { execRoutes } from "./http/exec-routes.js";
import { keysRoutes } from "./http/keys-routes.js";
import { sessionRoutes } from "./http/sessions-routes.js";
import { webhooksRoutes } from "./http/webhooks-routes.js";
import { daytonaRoutes } from "./http/compat/daytona.js";
import { openCodeRoutes } from "./http/compat/opencode.js";

export { PtySession } from "./session/pty-session.js";
export { RunnerPool } from "./pool/runner-pool.js";
export { Tenant } from "./tenant/tenant.js";
export { TenantRegistry } from "./tenant/registry.js";

const app = new Hono<{ Bindings: Env; Variables: RunnerVariables }>();

app.use("*", async (c, next) => {
  setLogLevel(c.env.LOG_LEVEL);
  await next();
});

// Before authentication: preflights from allowed origins are answered without credentials.
app.use("/v1/*", apiCors);
app.use("/compat/*", apiCors);
app.use("/healthz", apiCors);

// `instance` names this edge when EDGE_INSTANCE is set (a local start's readiness check, scripts/stack.ts).
app.get("/healthz", (c) => c.json(c.env.EDGE_INSTANCE ? { ok: true, instance: c.env.EDGE_INSTANCE } : { ok: true }));

app.route("/v1/sessions", sessionRoutes);
app.route("/v1/events", eventRoutes);
app.route("/v1/exec", execRoutes);
app.route("/v1/keys", keysRoutes);
app.route("/v1/webhooks", webhooksRoutes);
app.route("/v1/audit", auditRoutes);
// The admin API (ADMIN_KEY; unset: 404 as an unknown route).
app.route("/admin/v1", adminRoutes);
app.route("/compat/daytona", daytonaRoutes);
app.route("/compat/opencode", openCodeRoutes);

// Runner sockets: a runner credential or RUNNER_TOKEN opens them; API keys never do. The
// upgrade reaches the object with headers built from the verified identity, never the caller's.
app.get("/internal/runners/connect", requireRunner, (c) =>
  poolStub(c.env).fetch(
    new Request("https://pool/connect", { headers: runnerHeaders(c.req.raw, c.get("runner")) }),
  ),
);

app.get("/internal/runners", requireRunner, async (c) => c.json({ runners: await poolStub(c.env).runners() }));

app.get("/internal/sessions/:tenant/:id/link", requireRunner, (c) => {
  const { tenant, id } = c.req.param();
  if (!TENANT_PATTERN.test(tenant) || !SESSION_ID.test(id)) throw new ApiError("NOT_FOUND", "no such session");
  const runner = c.get("runner");
  if (runner.tenants && !runner.tenants.includes(tenant)) throw new ApiError("NOT_FOUND", "no such session");
  const role = c.req.query("role") === "reader" ? "?role=reader" : "";
  const headers = runnerHeaders(c.req.raw, runner, { "x-link-token": c.req.header("x-link-token") });
  return sessionStub(c.env, tenant, id).fetch(new Request(`https://session/link${role}`, { headers }));
});

// A runner's report that the tenant bound trimmed the log of a session it does not host (one
// that ended, or lives on another runner): the session's `retainedFrom` moves on (docs/protocol.md
// §7a). A runner scoped to tenants reports only theirs.
app.post("/internal/sessions/:tenant/:id/retained", requireRunner, validate("json", LogTrimmedBody), async (c) => {
  const { tenant, id } = c.req.param();
  if (!TENANT_PATTERN.test(tenant) || !SESSION_ID.test(id)) throw new ApiError("NOT_FOUND", "no such session");
  const runner = c.get("runner");
  if (runner.tenants && !runner.tenants.includes(tenant)) throw new ApiError("NOT_FOUND", "no such session");
  const { incarnation, from } = c.req.valid("json");
  await sessionStub(c.env, tenant, id).logTrimmed(incarnation, from);
  return c.body(null, 204);
});

// A path no route has: 404; a route's path under a method it does not take: 405 with `Allow`.
app.notFound(routeNotFound(() => app.routes));
app.onError(renderError);

export default app;
