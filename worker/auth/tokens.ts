// Scoped session tokens: HS256 JWTs (hono/jwt) signed with TOKEN_SECRET, bound to one tenant,
// one session and one role, with an expiry. They are credentials for one session only: a viewer
// reads, a writer also types, resizes and signals (docs/security.md, "Roles").
import { sign, verify } from "hono/jwt";
import { KEY_ID } from "./keys.js";

export const TOKEN_ROLES = ["viewer", "writer"] as const;
export type TokenRole = (typeof TOKEN_ROLES)[number];

export interface TokenClaims {
  tenant: string;
  sessionId: string;
  /** The incarnation of the id the token was minted for: a purged id created again is another session. */
  incarnation: string;
  role: TokenRole;
  /**
   * The API key the token was minted with (keys.ts ids; `kid`): the token dies with that key.
   * Absent in tokens minted before keys had ids.
   */
  keyId?: string;
  /** The token's own id (`jti`), for the audit log (`tok:<jti>`); absent in tokens minted before it. */
  tokenId?: string;
}

/** Marks our tokens, so a JWT signed with the same secret for something else is not one. */
const AUDIENCE = "ptybroker-session";

export async function mintToken(
  secret: string,
  claims: TokenClaims,
  ttlSec: number,
  now = Date.now(),
): Promise<{ token: string; expiresAt: string; tokenId: string }> {
  const iat = Math.floor(now / 1000);
  const exp = iat + ttlSec;
  const tokenId = Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) => b.toString(16).padStart(2, "0")).join("");
  const token = await sign(
    {
      aud: AUDIENCE,
      ten: claims.tenant,
      sid: claims.sessionId,
      inc: claims.incarnation,
      role: claims.role,
      ...(claims.keyId === undefined ? {} : { kid: claims.keyId }),
      jti: tokenId,
      iat,
      exp,
    },
    secret,
    "HS256",
  );
  return { token, expiresAt: new Date(exp * 1000).toISOString(), tokenId };
}

/** What a presented token turned out to be: a session token's claims, or why it is not one. */
export type TokenCheck =
  | { ok: true; claims: TokenClaims }
  | { ok: false; expired: false }
  /** Ours and genuine (signature checked), but past its expiry: `expiredAt` is when (ISO). */
  | { ok: false; expired: true; expiredAt: string };

/**
 * Checks a session token. Its signature is checked before its expiry, so "expired" is said only
 * of a token this edge really minted; a forged one is "invalid" whatever its `exp` claims.
 */
export async function checkToken(secret: string, token: string, now = Date.now()): Promise<TokenCheck> {
  let payload: Awaited<ReturnType<typeof verify>>;
  try {
    payload = await verify(token, secret, { alg: "HS256", aud: AUDIENCE, exp: false });
  } catch {
    return { ok: false, expired: false };
  }
  const { ten, sid, inc, role, exp, kid, jti } = payload;
  if (typeof ten !== "string" || typeof sid !== "string" || typeof inc !== "string") return { ok: false, expired: false };
  if (kid !== undefined && (typeof kid !== "string" || !KEY_ID.test(kid))) return { ok: false, expired: false };
  if (!TOKEN_ROLES.includes(role as TokenRole) || typeof exp !== "number" || !Number.isFinite(exp)) {
    return { ok: false, expired: false };
  }
  if (exp <= Math.floor(now / 1000)) return { ok: false, expired: true, expiredAt: new Date(exp * 1000).toISOString() };
  const claims: TokenClaims = { tenant: ten, sessionId: sid, incarnation: inc, role: role as TokenRole };
  if (typeof kid === "string") claims.keyId = kid;
  if (typeof jti === "string" && /^[0-9a-f]{1,64}$/.test(jti)) claims.tokenId = jti;
  return { ok: true, claims };
}
