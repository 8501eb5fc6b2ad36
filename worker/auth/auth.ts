// Who is calling: API keys (`API_KEYS` = `tenant:key` or `tenant:sha256:<hex>`, compared as
// SHA-256 digests in constant time; and keys minted as data, checked by their tenant's object,
// keys.ts) and session tokens for the public API, `RUNNER_TOKEN` for runner sockets.
import { createMiddleware } from "hono/factory";
import { ApiError } from "../../shared/errors.js";
import { KEY_SCOPES, type KeyScope } from "../../shared/keys.js";
import { log } from "../../shared/log.js";
import { verifyRunnerCredential } from "../../shared/runner-credential.js";
import { type Env, tenantStub } from "../env.js";
import type { KeyCheck } from "../rpc.js";
import { missingScope, parseMintedKey, secretHash, staticKeyId } from "./keys.js";
import { type TokenClaims, type TokenRole, checkToken } from "./tokens.js";

export const TENANT_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

interface KeyEntry {
  tenant: string;
  digest: Uint8Array;
  /** Stable and non-secret (keys.ts, staticKeyId): what sockets, tokens and logs name it by. */
  keyId: string;
}

const encoder = new TextEncoder();

async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

function hexToBytes(hex: string): Uint8Array {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return bytes;
}

function digestsEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && crypto.subtle.timingSafeEqual(a, b);
}

/** Whether two secrets are equal, compared as SHA-256 digests in constant time (lengths do not show). */
export async function secretsEqual(a: string, b: string): Promise<boolean> {
  return digestsEqual(await sha256(a), await sha256(b));
}

/** Parsed key lists, per isolate, keyed by the raw `API_KEYS` text. */
const keyCache = new Map<string, Promise<KeyEntry[]>>();

export function parseApiKeys(raw: string | undefined): Promise<KeyEntry[]> {
  const text = raw ?? "";
  let entries = keyCache.get(text);
  if (!entries) {
    entries = Promise.all(
      text
        .split(",")
        .map((item) => item.trim())
        .filter(Boolean)
        .map(async (item): Promise<KeyEntry | null> => {
          const colon = item.indexOf(":");
          const tenant = item.slice(0, colon);
          const key = item.slice(colon + 1);
          if (colon < 1 || !TENANT_PATTERN.test(tenant) || !key) {
            log.warn("auth.config", { outcome: "bad_api_key_entry", tenant: tenant || null });
            return null;
          }
          const hashed = /^sha256:([0-9a-fA-F]{64})$/.exec(key);
          const digest = hashed ? hexToBytes(hashed[1]) : await sha256(key);
          return { tenant, digest, keyId: await staticKeyId(digest) };
        }),
    ).then((list) => list.filter((entry): entry is KeyEntry => entry !== null));
    keyCache.set(text, entries);
  }
  return entries;
}

/** The `API_KEYS` entry a key is, or null. Every entry is compared, match or not. */
async function staticKey(env: Env, key: string): Promise<KeyEntry | null> {
  const digest = await sha256(key);
  let found: KeyEntry | null = null;
  for (const entry of await parseApiKeys(env.API_KEYS)) {
    if (digestsEqual(entry.digest, digest) && found === null) found = entry;
  }
  return found;
}

export function bearer(header: string | undefined): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return match ? match[1] : null;
}

/** Whoever holds one of the tenant's API keys: `API_KEYS` (every scope) or a minted key (its scopes). */
export interface OwnerPrincipal {
  tenant: string;
  role: "owner";
  keyId: string;
  scopes: readonly KeyScope[];
}

/** Who is calling: the tenant's owner (an API key) or a session token's holder (`keyId`: the key that minted it). */
export type Principal = OwnerPrincipal | ({ role: TokenRole } & TokenClaims);

export type AuthVariables = { tenant: string; principal: Principal };

/** A minted key's check, as a 401 when it fails: an expired key says since when. */
function keyRefusal(check: Extract<KeyCheck, { ok: false }>, what: string): ApiError {
  if (check.expiredAt) return new ApiError("UNAUTHORIZED", `${what} expired at ${check.expiredAt}`);
  return new ApiError("UNAUTHORIZED", `${what} was revoked or never issued`);
}

/**
 * The owner an API key stands for: an `API_KEYS` key (every scope), or a minted key, checked by
 * its tenant's object on every request (no cache: a revoke holds from the next request). Null
 * when the text is neither; 401 for a minted key that expired or was revoked.
 */
export async function keyPrincipal(env: Env, key: string): Promise<OwnerPrincipal | null> {
  const entry = await staticKey(env, key);
  if (entry) return { tenant: entry.tenant, role: "owner", keyId: entry.keyId, scopes: KEY_SCOPES };
  const minted = parseMintedKey(key);
  if (!minted) return null;
  const check = await tenantStub(env, minted.tenant).checkKey(minted.keyId, await secretHash(minted.secret));
  if (!check.ok) throw keyRefusal(check, "this API key");
  return { tenant: minted.tenant, role: "owner", keyId: minted.keyId, scopes: check.scopes };
}


/**
 * A session token's claims once its key still stands: a token names the key that minted it, and
 * dies with it (revoked, expired, or gone from `API_KEYS`). Null when the text is no token of ours.
 */
export async function tokenPrincipal(env: Env, token: string): Promise<({ role: TokenRole } & TokenClaims) | null> {
  if (!env.TOKEN_SECRET) return null;
  const check = await checkToken(env.TOKEN_SECRET, token);
  if (!check.ok) {
    if (check.expired) throw new ApiError("UNAUTHORIZED", `session token expired at ${check.expiredAt}`);
    return null;
  }
  const { tenant, keyId } = check.claims;
  if (keyId === undefined) return check.claims;
  if (keyId.startsWith("s")) {
    const entries = await parseApiKeys(env.API_KEYS);
    if (entries.some((entry) => entry.keyId === keyId && entry.tenant === tenant)) return check.claims;
    throw new ApiError("UNAUTHORIZED", "the API key this session token was minted with is no longer configured");
  }
  const alive = await tenantStub(env, tenant).keyAlive(keyId);
  if (!alive.ok) throw keyRefusal(alive, "the API key this session token was minted with");
  return check.claims;
}

/**
 * Public API: an API key or a session token as `Authorization: Bearer`, or a session token as
 * `?token=` (browsers cannot set WebSocket headers). API keys are never taken from the URL,
 * where they would end up in logs and histories. Each refusal says what is wrong: no
 * credential, an Authorization header without `Bearer`, a session token past its expiry, a
 * minted key expired (since when) or revoked, or a credential that is neither a key nor a
 * genuine token.
 */
export const authenticate = createMiddleware<{ Bindings: Env; Variables: AuthVariables }>(async (c, next) => {
  const authorization = c.req.header("authorization");
  const header = bearer(authorization);
  // A bare "Bearer" (a client that had no key to put there) is no credential: `?token=` may follow.
  const bare = /^\s*(Bearer\s*)?$/i.test(authorization ?? "");
  if (!bare && !header) {
    throw new ApiError("UNAUTHORIZED", "Authorization must be 'Bearer <api key or session token>'");
  }
  const query = c.req.query("token");
  const credential = header ?? query;
  if (!credential) {
    throw new ApiError("UNAUTHORIZED", "missing credentials: send Authorization: Bearer <api key or session token>");
  }
  const principal: Principal | null = (header ? await keyPrincipal(c.env, header) : null) ?? (await tokenPrincipal(c.env, credential));
  if (!principal) throw new ApiError("UNAUTHORIZED", "invalid API key or session token (forged or malformed)");
  c.set("principal", principal);
  c.set("tenant", principal.tenant);
  await next();
});

export type Access = "read" | "write" | "owner";

/**
 * Tenant-wide actions (create, list, exec, events, keys) belong to an API key alone, one that
 * carries `scope`; returns the tenant. A session token is refused (403), and so is a key without
 * the scope (403 naming it).
 */
export function requireScope(principal: Principal, scope: KeyScope): string {
  if (principal.role !== "owner") throw new ApiError("FORBIDDEN", `a ${principal.role} token may not do this`);
  if (!principal.scopes.includes(scope)) throw missingScope(scope);
  return principal.tenant;
}

/** The tenant, once the caller is an API key carrying every scope (`/v1/keys`, `/v1/audit`). */
export function requireEveryScope(principal: Principal): string {
  for (const scope of KEY_SCOPES) requireScope(principal, scope);
  return principal.tenant;
}

/** Whether an API key carries `scope` (a session token carries none). */
export function hasScope(principal: Principal, scope: KeyScope): boolean {
  return principal.role === "owner" && principal.scopes.includes(scope);
}

/**
 * Within one session: viewers read; writers also write (input, resize, signal); only the owner
 * does the rest. An API key reads with `sessions:read` and does the rest with `sessions:write`;
 * a key without it is refused with 403 naming the scope.
 */
export function checkAccess(principal: Principal, access: Access): void {
  if (principal.role === "owner") {
    const scope: KeyScope = access === "read" ? "sessions:read" : "sessions:write";
    if (!principal.scopes.includes(scope)) throw missingScope(scope);
    return;
  }
  if (access === "read" || (access === "write" && principal.role === "writer")) return;
  throw new ApiError("FORBIDDEN", `a ${principal.role} token may not do this`);
}

/** Who a runner is: from its credential (verified) or, with the shared token, what it says. */
export interface RunnerIdentity {
  runnerId: string | null;
  /** null = any tenant */
  tenants: string[] | null;
  verified: boolean;
}

export type RunnerVariables = { runner: RunnerIdentity };

/**
 * Runner sockets: a per-runner credential signed with RUNNER_SECRET (the runner's id and
 * tenants come from it), or the shared RUNNER_TOKEN (any tenant; the id is what the runner
 * says). Never an API key.
 */
export const requireRunner = createMiddleware<{ Bindings: Env; Variables: RunnerVariables }>(async (c, next) => {
  const token = bearer(c.req.header("authorization"));
  if (!c.env.RUNNER_TOKEN && !c.env.RUNNER_SECRET) {
    throw new ApiError("UNAUTHORIZED", "runner links are disabled: neither RUNNER_TOKEN nor RUNNER_SECRET is set");
  }
  if (!token) throw new ApiError("UNAUTHORIZED", "missing runner credential");
  const claims = c.env.RUNNER_SECRET ? await verifyRunnerCredential(c.env.RUNNER_SECRET, token) : null;
  if (claims) {
    c.set("runner", { runnerId: claims.runnerId, tenants: claims.tenants, verified: true });
  } else if (c.env.RUNNER_TOKEN && (await secretsEqual(token, c.env.RUNNER_TOKEN))) {
    const claimed = c.req.header("x-runner-id") ?? null;
    c.set("runner", { runnerId: claimed, tenants: null, verified: false });
  } else {
    throw new ApiError("UNAUTHORIZED", "invalid runner credential");
  }
  await next();
});

/**
 * Headers that carry a runner's identity to a Durable Object: built here from what
 * requireRunner established, never copied from the request (a caller cannot set them).
 */
export function runnerHeaders(
  request: Request,
  runner: RunnerIdentity,
  extra: Record<string, string | undefined> = {},
): Headers {
  const headers = new Headers(request.headers);
  for (const name of ["x-runner-id", "x-runner-verified", "x-runner-tenants", "x-link-token", "authorization"]) {
    headers.delete(name);
  }
  if (runner.runnerId) headers.set("x-runner-id", runner.runnerId);
  if (runner.verified) {
    headers.set("x-runner-verified", "1");
    headers.set("x-runner-tenants", JSON.stringify(runner.tenants));
  }
  for (const [name, value] of Object.entries(extra)) if (value !== undefined) headers.set(name, value);
  return headers;
}

/** The identity a Durable Object was given by `runnerHeaders`. */
export function runnerFromHeaders(headers: Headers): RunnerIdentity {
  const verified = headers.get("x-runner-verified") === "1";
  return {
    runnerId: headers.get("x-runner-id"),
    tenants: verified ? (JSON.parse(headers.get("x-runner-tenants") ?? "null") as string[] | null) : null,
    verified,
  };
}
