// Scoped session tokens: HS256 JWTs (hono/jwt) signed with TOKEN_SECRET, bound to one tenant,
// one session and one role, with an expiry. They are credentials for one session only: a
// viewer reads, a writer also types, resizes and signals (DESIGN §4 "Roles").
import { sign, verify } from "hono/jwt";

export const TOKEN_ROLES = ["viewer", "writer"] as const;
export type TokenRole = (typeof TOKEN_ROLES)[number];

export interface TokenClaims {
  tenant: string;
  sessionId: string;
  /** The incarnation of the id the token was minted for: a purged id created again is another session. */
  incarnation: string;
  role: TokenRole;
}

/** Marks our tokens, so a JWT signed with the same secret for something else is not one. */
const AUDIENCE = "ptybroker-session";

export async function mintToken(
  secret: string,
  claims: TokenClaims,
  ttlSec: number,
  now = Date.now(),
): Promise<{ token: string; expiresAt: string }> {
  const iat = Math.floor(now / 1000);
  const exp = iat + ttlSec;
  const token = await sign(
    { aud: AUDIENCE, ten: claims.tenant, sid: claims.sessionId, inc: claims.incarnation, role: claims.role, iat, exp },
    secret,
    "HS256",
  );
  return { token, expiresAt: new Date(exp * 1000).toISOString() };
}

/** The token's claims, or null when it is forged, expired, malformed or not a session token. */
export async function verifyToken(secret: string, token: string): Promise<TokenClaims | null> {
  try {
    const payload = await verify(token, secret, { alg: "HS256", aud: AUDIENCE });
    const { ten, sid, inc, role } = payload;
    if (typeof ten !== "string" || typeof sid !== "string" || typeof inc !== "string") return null;
    if (!TOKEN_ROLES.includes(role as TokenRole) || typeof payload.exp !== "number") return null;
    return { tenant: ten, sessionId: sid, incarnation: inc, role: role as TokenRole };
  } catch {
    return null;
  }
}
