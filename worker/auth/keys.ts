// Minted API keys (docs/security.md, "Keys"): their text names the tenant and the key id, so the
// one object that holds the key (the tenant's) checks it and nothing global is asked; only a
// SHA-256 hash of the secret part is stored. Scopes and the checks routes make with them.
import { ApiError } from "../../shared/errors.js";
import { KEY_SCOPES, type KeyScope } from "../../shared/keys.js";

/** `ptyb.<tenant>.<keyId>.<secret>`: `.` is in no tenant name, key id or secret. */
const MINTED_KEY = /^ptyb\.([A-Za-z0-9_-]{1,64})\.(k[0-9a-f]{16})\.([A-Za-z0-9_-]{43})$/;
export const KEY_ID = /^[ks][0-9a-f]{16}$/;

export interface MintedKeyParts {
  tenant: string;
  keyId: string;
  secret: string;
}

/** The parts of a minted key's text, or null when the text is not one. */
export function parseMintedKey(text: string): MintedKeyParts | null {
  const match = MINTED_KEY.exec(text);
  return match ? { tenant: match[1], keyId: match[2], secret: match[3] } : null;
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The stored form of a key's secret part: SHA-256, hex. */
export async function secretHash(secret: string): Promise<string> {
  return hex(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(secret))));
}

/** A new key for `tenant`: its text (shown once), its id and the hash the tenant's object keeps. */
export async function newKey(tenant: string): Promise<{ keyId: string; key: string; hash: string; prefix: string }> {
  const keyId = `k${hex(crypto.getRandomValues(new Uint8Array(8)))}`;
  const secret = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const prefix = keyPrefix(tenant, keyId);
  return { keyId, key: `${prefix}.${secret}`, hash: await secretHash(secret), prefix };
}

export function keyPrefix(tenant: string, keyId: string): string {
  return `ptyb.${tenant}.${keyId}`;
}

/**
 * A stable, non-secret id for an `API_KEYS` key: from its digest, hashed again under a label,
 * so the id gives nothing towards the key or its configured digest.
 */
export async function staticKeyId(digest: Uint8Array): Promise<string> {
  const label = new TextEncoder().encode("ptybroker static key id\0");
  const input = new Uint8Array(label.byteLength + digest.byteLength);
  input.set(label);
  input.set(digest, label.byteLength);
  return `s${hex(new Uint8Array(await crypto.subtle.digest("SHA-256", input))).slice(0, 16)}`;
}

/** Scopes as stored and shown: none given = all, in the list's order, each once. */
export function normalScopes(scopes: readonly KeyScope[] | undefined): KeyScope[] {
  if (!scopes || scopes.length === 0) return [...KEY_SCOPES];
  return KEY_SCOPES.filter((scope) => scopes.includes(scope));
}

/** Whoever holds a key (not a session token) and the scopes it carries. */
export interface KeyHolder {
  role: "owner";
  scopes: readonly KeyScope[];
}

/** 403 FORBIDDEN naming the scope the key lacks. */
export function missingScope(scope: KeyScope): ApiError {
  return new ApiError("FORBIDDEN", `this API key lacks the scope ${scope}`);
}
