// Per-runner credentials (docs/security.md, "Credentials"): an HS256 JWT (hono/jwt) signed with
// the edge's RUNNER_SECRET that names one runner and the tenants it may serve. The edge takes a
// runner's id and tenants from it, never from what the runner says. Minted by `ptybroker
// runner-credential`, verified by the Worker; pure, so both runtimes share it.
import { sign, verify } from "hono/jwt";

export interface RunnerClaims {
  runnerId: string;
  /** Tenants whose sessions the runner may host and serve; null = any tenant. */
  tenants: string[] | null;
}

/** Marks runner credentials, so a JWT signed with the same secret for something else is not one. */
const AUDIENCE = "ptybroker-runner";
const RUNNER_ID = /^[A-Za-z0-9._-]{1,128}$/;
const TENANT = /^[A-Za-z0-9_-]{1,64}$/;

/** Checks the claims; a message naming what is wrong, or null. */
export function runnerClaimsProblem(claims: RunnerClaims): string | null {
  if (!RUNNER_ID.test(claims.runnerId)) return "the runner id is 1-128 of A-Z a-z 0-9 . _ -";
  if (claims.tenants !== null) {
    if (claims.tenants.length === 0) return "name at least one tenant, or none for any tenant";
    const bad = claims.tenants.find((t) => !TENANT.test(t));
    if (bad !== undefined) return `bad tenant ${JSON.stringify(bad)}: 1-64 of A-Z a-z 0-9 _ -`;
  }
  return null;
}

export async function mintRunnerCredential(secret: string, claims: RunnerClaims, now = Date.now()): Promise<string> {
  const problem = runnerClaimsProblem(claims);
  if (problem) throw new RangeError(problem);
  return sign(
    { aud: AUDIENCE, rid: claims.runnerId, ten: claims.tenants, iat: Math.floor(now / 1000) },
    secret,
    "HS256",
  );
}

/** The credential's claims, or null when it is forged, malformed or not a runner credential. */
export async function verifyRunnerCredential(secret: string, token: string): Promise<RunnerClaims | null> {
  try {
    const payload = await verify(token, secret, { alg: "HS256", aud: AUDIENCE });
    const { rid, ten } = payload;
    if (typeof rid !== "string") return null;
    const tenants = ten === null ? null : Array.isArray(ten) && ten.every((t) => typeof t === "string") ? ten : undefined;
    if (tenants === undefined) return null;
    const claims: RunnerClaims = { runnerId: rid, tenants: tenants as string[] | null };
    return runnerClaimsProblem(claims) ? null : claims;
  } catch {
    return null;
  }
}
