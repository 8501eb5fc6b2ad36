// A tenant's keys, for the admin API (`/admin/v1/tenants/:id/keys`) and the tenant's own
// `/v1/keys` alike: the key is made here (its text shown once, in the answer), its hash kept by
// the tenant's object (tenant/tenant-keys.ts).
import { ApiError, type Failure, unwrap } from "../../shared/errors.js";
import type { KeyInfo, KeyScope, MintedKey } from "../../shared/keys.js";
import { log } from "../../shared/log.js";
import { newKey, normalScopes } from "../auth/keys.js";
import { type Env, tenantStub } from "../env.js";
import { keyIdParam } from "./key-schemas.js";

export interface KeyRequest {
  name: string;
  scopes?: KeyScope[];
  expiresAt?: string;
}

export async function createKey(env: Env, tenant: string, body: KeyRequest): Promise<MintedKey> {
  const made = await newKey(tenant);
  const expiresAt = body.expiresAt === undefined ? null : new Date(Date.parse(body.expiresAt)).toISOString();
  const stored = await tenantStub(env, tenant).addKey(tenant, {
    keyId: made.keyId,
    name: body.name,
    hash: made.hash,
    scopes: normalScopes(body.scopes),
    expiresAt,
  });
  // RPC typing wraps results as Disposable; the value is the object's own KeyInfo or Failure.
  const info = unwrap(stored as KeyInfo | Failure);
  log.info("keys.create", { tenant, keyId: info.keyId, outcome: "created" });
  return { ...info, key: made.key };
}

export async function listKeys(env: Env, tenant: string): Promise<{ keys: KeyInfo[] }> {
  return { keys: (await tenantStub(env, tenant).listKeys(tenant)) as KeyInfo[] };
}

/** Revokes at once; 404 for an id the tenant has no key under. */
export async function revokeKey(env: Env, tenant: string, rawKeyId: string): Promise<{ keyId: string; revoked: true }> {
  const keyId = keyIdParam(rawKeyId);
  if (!keyId) throw new ApiError("NOT_FOUND", `key ${rawKeyId} not found`);
  // RPC typing wraps results as Disposable; the value is the object's own answer or Failure.
  const done = unwrap((await tenantStub(env, tenant).revokeKey(keyId)) as { keyId: string; closed: number } | Failure);
  return { keyId: done.keyId, revoked: true };
}
