// Webhook signatures (docs/security.md, "Webhooks"): `Ptybroker-Signature: t=<unix seconds>,
// v1=<hex HMAC-SHA256 of "<t>.<body>">`, Stripe-style. The edge signs with `signWebhook`; a
// receiver checks with `verifyWebhook` (the SDK exports it). Web Crypto only, so it runs in
// workerd, Node 20 and browsers alike.

// shared/ is compiled without the DOM's or a runtime's types (shared/README.md): these are the
// parts of Web Crypto and TextEncoder used here, which workerd, Node 20 and browsers all have.
declare const crypto: {
  subtle: {
    importKey(format: "raw", key: Uint8Array, algorithm: { name: "HMAC"; hash: "SHA-256" }, extractable: false, usages: ["sign"]): Promise<unknown>;
    sign(algorithm: "HMAC", key: unknown, data: Uint8Array): Promise<ArrayBuffer>;
  };
};
declare const TextEncoder: new () => { encode(text: string): Uint8Array };

const encoder = new TextEncoder();

function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function hmacHex(secret: string, text: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return hex(await crypto.subtle.sign("HMAC", key, encoder.encode(text)));
}

/** The header value for `body` sent at `t` (unix seconds). */
export async function signWebhook(secret: string, body: string, t: number): Promise<string> {
  return `t=${t},v1=${await hmacHex(secret, `${t}.${body}`)}`;
}

/** Why a webhook was refused: the header is absent or garbled, the signature wrong, or the timestamp too old. */
export type WebhookVerifyCode = "missing_header" | "malformed_header" | "bad_signature" | "too_old";

export class WebhookVerifyError extends Error {
  override readonly name = "WebhookVerifyError";
  constructor(
    readonly code: WebhookVerifyCode,
    message: string,
  ) {
    super(message);
  }
}

/** Equal strings of the same length, compared without stopping at the first difference. */
function sameText(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/**
 * Checks a webhook the edge sent: `body` exactly as received (the raw text, not re-serialized
 * JSON), `header` the `Ptybroker-Signature` value. Resolves with the signed time (unix seconds)
 * when it holds; throws WebhookVerifyError (its `code` says which check failed) when the header
 * is missing or garbled, no `v1` matches, or `t` is more than `toleranceSec` from now (a
 * replay). Every `v1` in the header is tried (a rotated secret may be sent twice).
 */
export async function verifyWebhook(
  body: string,
  header: string | null | undefined,
  secret: string,
  toleranceSec = 300,
  now = Date.now(),
): Promise<number> {
  if (!header) throw new WebhookVerifyError("missing_header", "no Ptybroker-Signature header");
  let t: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (eq < 1) continue;
    if (name === "t" && /^\d{1,12}$/.test(value)) t = Number(value);
    else if (name === "v1" && /^[0-9a-f]{64}$/.test(value)) signatures.push(value);
  }
  if (t === null || signatures.length === 0) {
    throw new WebhookVerifyError("malformed_header", "Ptybroker-Signature is not t=<unix seconds>,v1=<hex HMAC-SHA256>");
  }
  const expected = await hmacHex(secret, `${t}.${body}`);
  let matched = false;
  for (const signature of signatures) if (sameText(signature, expected)) matched = true;
  if (!matched) throw new WebhookVerifyError("bad_signature", "the signature does not match this body and secret");
  const age = Math.abs(Math.floor(now / 1000) - t);
  if (age > toleranceSec) {
    throw new WebhookVerifyError("too_old", `signed ${age} s from now, more than the ${toleranceSec} s tolerated`);
  }
  return t;
}
