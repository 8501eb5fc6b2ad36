// The admin API, `/admin/v1/*` (docs/protocol.md, "Admin API"): tenants with their limits as
// data, and their keys. It answers only `Authorization: Bearer <ADMIN_KEY>` (compared in constant
// time); a tenant's key or session token is refused (401). With ADMIN_KEY unset every admin path
// answers 404, as a route that does not exist.
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError, type Failure, unwrap } from "../../shared/errors.js";
import type { TenantInfo, TenantLimits } from "../../shared/keys.js";
import { log } from "../../shared/log.js";
import { bearer, secretsEqual } from "../auth/auth.js";
import { type Env, registryStub, tenantStub } from "../env.js";
import { actorOf, audited } from "./audit.js";
import { createKey, listKeys, revokeKey } from "./key-actions.js";
import { CreateKeyBody, CreateTenantBody, PatchTenantBody, TENANT_ID, TenantListQuery } from "./key-schemas.js";
import { jsonBodies, validate } from "./validate.js";

export const adminRoutes = new Hono<{ Bindings: Env }>();

adminRoutes.use("*", async (c, next) => {
  const adminKey = c.env.ADMIN_KEY;
  if (!adminKey) throw new ApiError("NOT_FOUND", "no such route");
  const presented = bearer(c.req.header("authorization"));
  if (!presented || !(await secretsEqual(presented, adminKey))) {
    log.warn("admin.auth", { path: c.req.path, outcome: presented ? "refused" : "missing" });
    throw new ApiError("UNAUTHORIZED", "the admin API takes Authorization: Bearer <ADMIN_KEY>");
  }
  await next();
});
adminRoutes.use("*", jsonBodies);
adminRoutes.use(
  "*",
  bodyLimit({
    maxSize: 16 * 1024,
    onError: () => {
      throw new ApiError("PAYLOAD_TOO_LARGE", "request body too large");
    },
  }),
);

/** A registered tenant named in the path, or 404. */
async function registered(env: Env, raw: string): Promise<TenantInfo> {
  if (!TENANT_ID.test(raw)) throw new ApiError("NOT_FOUND", `tenant ${raw} not found`);
  // RPC typing wraps results as Disposable; the value is the registry's own TenantInfo or Failure.
  return unwrap((await registryStub(env).get(raw)) as TenantInfo | Failure);
}

adminRoutes.post("/tenants", validate("json", CreateTenantBody), async (c) => {
  const { id, limits = {} } = c.req.valid("json");
  const registry = registryStub(c.env);
  const tenant = unwrap((await registry.add({ id, limits, createdAt: new Date().toISOString() })) as TenantInfo | Failure);
  try {
    await tenantStub(c.env, id).configure(id, limits);
  } catch (error) {
    // The tenant's object holds its limits: without them the registry must not list it.
    await registry.remove(id);
    throw error;
  }
  log.info("admin.tenant", { tenant: id, outcome: "created" });
  return c.json(tenant, 201);
});

adminRoutes.get("/tenants", validate("query", TenantListQuery), async (c) => {
  const { limit, cursor } = c.req.valid("query");
  return c.json(await registryStub(c.env).list(cursor ?? null, limit));
});

adminRoutes.get("/tenants/:id", async (c) => c.json(await registered(c.env, c.req.param("id"))));

adminRoutes.patch("/tenants/:id", validate("json", PatchTenantBody), async (c) => {
  const { id, limits: current } = await registered(c.env, c.req.param("id"));
  const limits: TenantLimits = { ...current };
  for (const [name, value] of Object.entries(c.req.valid("json").limits) as [keyof TenantLimits, number | null][]) {
    if (value === null) delete limits[name];
    else limits[name] = value;
  }
  // The tenant's object first: its next request is measured against the new limits.
  await tenantStub(c.env, id).configure(id, limits);
  const updated = unwrap((await registryStub(c.env).update(id, limits)) as TenantInfo | Failure);
  log.info("admin.tenant", { tenant: id, outcome: "updated" });
  return c.json(updated);
});

adminRoutes.delete("/tenants/:id", async (c) => {
  const { id } = await registered(c.env, c.req.param("id"));
  const { sessions, keys } = await tenantStub(c.env, id).dissolve(id);
  await registryStub(c.env).remove(id);
  log.info("admin.tenant", { tenant: id, outcome: "deleted", sessions, keys });
  return c.json({ id, deleted: true, sessions, keys });
});

adminRoutes.post("/tenants/:id/keys", validate("json", CreateKeyBody), async (c) => {
  const { id } = await registered(c.env, c.req.param("id"));
  const made = await audited(c, { tenant: id, actor: actorOf("admin"), action: "key.create" }, async (detail) => {
    const key = await createKey(c.env, id, c.req.valid("json"));
    detail.keyId = key.keyId;
    return key;
  });
  return c.json(made, 201);
});

adminRoutes.get("/tenants/:id/keys", async (c) => {
  const { id } = await registered(c.env, c.req.param("id"));
  return c.json(await listKeys(c.env, id));
});

adminRoutes.delete("/tenants/:id/keys/:keyId", async (c) => {
  const { id } = await registered(c.env, c.req.param("id"));
  const keyId = c.req.param("keyId");
  const what = { tenant: id, actor: actorOf("admin"), action: "key.revoke" as const, detail: { keyId: keyId.slice(0, 64) } };
  return c.json(await audited(c, what, () => revokeKey(c.env, id, keyId)));
});
