// Webhook signatures: what the edge signs, a receiver checks, and each refusal verifyWebhook makes.
import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { WebhookVerifyError, signWebhook, verifyWebhook } from "./webhook-signature.js";

const SECRET = "whsec_0123456789abcdef";
const BODY = '{"id":"7","type":"session.created","at":"2026-11-27T03:00:00.000Z","session":{"id":"s1"}}';
const T = 1_800_000_000;
const NOW = T * 1000;

async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(WebhookVerifyError);
    return (error as WebhookVerifyError).code;
  }
  throw new Error("verifyWebhook accepted it");
}

describe("signWebhook", () => {
  it("is t=<unix>,v1=<hex HMAC-SHA256 of t.body>, as any HMAC library computes it", async () => {
    const expected = createHmac("sha256", SECRET).update(`${T}.${BODY}`).digest("hex");
    expect(await signWebhook(SECRET, BODY, T)).toBe(`t=${T},v1=${expected}`);
  });
});

describe("verifyWebhook", () => {
  it("accepts the edge's signature and answers the signed time", async () => {
    expect(await verifyWebhook(BODY, await signWebhook(SECRET, BODY, T), SECRET, 300, NOW)).toBe(T);
    // Within the tolerance either side, and with a second v1 (a rotated secret) in the header.
    const header = await signWebhook(SECRET, BODY, T);
    expect(await verifyWebhook(BODY, `${header},v1=${"0".repeat(64)}`, SECRET, 300, NOW + 299_000)).toBe(T);
  });

  it("refuses a missing or garbled header", async () => {
    expect(await refusal(verifyWebhook(BODY, null, SECRET, 300, NOW))).toBe("missing_header");
    expect(await refusal(verifyWebhook(BODY, "", SECRET, 300, NOW))).toBe("missing_header");
    for (const garbled of ["v1=abc", `t=${T}`, `t=soon,v1=${"a".repeat(64)}`, `t=${T},v1=XYZ`, "garbage"]) {
      expect(await refusal(verifyWebhook(BODY, garbled, SECRET, 300, NOW)), garbled).toBe("malformed_header");
    }
  });

  it("refuses a tampered body, another secret, and a signature moved to another time", async () => {
    const header = await signWebhook(SECRET, BODY, T);
    expect(await refusal(verifyWebhook(BODY.replace("s1", "s2"), header, SECRET, 300, NOW))).toBe("bad_signature");
    expect(await refusal(verifyWebhook(BODY, header, `${SECRET}x`, 300, NOW))).toBe("bad_signature");
    const moved = header.replace(`t=${T}`, `t=${T + 10}`);
    expect(await refusal(verifyWebhook(BODY, moved, SECRET, 300, NOW))).toBe("bad_signature");
  });

  it("refuses a genuine signature older than the tolerance (a replay)", async () => {
    const header = await signWebhook(SECRET, BODY, T);
    expect(await refusal(verifyWebhook(BODY, header, SECRET, 300, NOW + 301_000))).toBe("too_old");
    expect(await refusal(verifyWebhook(BODY, header, SECRET, 60, NOW + 61_000))).toBe("too_old");
  });
});
